"""ONNX Runtime (MLAS) form of ``pooling.py``'s float32 max pooling forward (issue 20).

One ``MaxPool`` node per shape, its session cached with ``ort_conv``'s. MLAS's vectorised
pooling ran LeNet's and the CNN's 2x2 pools 1.05-1.6x faster than NumPy's strided ``maximum``
over the taps (``bench/pool_relu.py``). Two cases where MLAS and ember differ are declined:

- MLAS drops a NaN unless it is a window's last tap, where ember (as PyTorch) propagates it: an
  input holding a NaN runs ember's kernel (one max over x finds it: NumPy's max propagates NaN);
- MLAS starts a window at float32's lowest value, not -inf (seen where it reads padding or ceil
  mode's overhang, and in a 4x4 window): an output holding that value (a window of -inf, or a
  true -3.4e38) is computed again by ember's kernel, whose padding is -inf.

Large inputs run one batch share per pool thread on one ORT thread each: each image is pooled
alone, so the bits do not depend on the split. ``None`` answers wherever ember's kernel must
run (the route off, another dtype, an empty input, the cases above, a shape ORT declines).
"""

from __future__ import annotations

import numpy as np

from .im2col import Pair
from .onnx_proto import Node, model
from .ort_conv import _on, _run, batch_shares
from .threads import num_threads

_OPSETS = {"": 17}
# input elements from which the batch is split between the pool's threads: MLAS pools about
# 4 elements a nanosecond, so smaller inputs take less time than a hand-off to the pool
_SPLIT_ELEMS = 1 << 20
_LOWEST = np.finfo(np.float32).min


def _max_pool(
    xs: tuple[int, ...],
    ys: tuple[int, ...],
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool,
) -> bytes:
    """y = MaxPool(x), x (N, C, H, W) -> y ``ys``."""
    attrs: dict[str, int | list[int]] = {
        "kernel_shape": list(kernel),
        "strides": list(stride),
        "pads": [padding[0], padding[1], padding[0], padding[1]],
        "dilations": list(dilation),
        "ceil_mode": int(ceil_mode),
    }
    return model([Node("MaxPool", ["x"], ["y"], attrs)], {"x": xs}, {"y": ys}, opsets=_OPSETS)


def max_pool2d(
    x: np.ndarray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool,
    out: Pair,
) -> np.ndarray | None:
    """(N, C, H, W) -> (N, C, *out): each window's maximum, or None (see the module)."""
    if x.ndim != 4 or not _on(x) or np.isnan(x.max()):
        return None
    n, c = x.shape[:2]

    def run(lo: int, hi: int) -> np.ndarray | None:
        xs, ys = (hi - lo, *x.shape[1:]), (hi - lo, c, *out)
        args = (xs, ys, kernel, stride, padding, dilation, ceil_mode)
        y = _run(_max_pool, args, {"x": x[lo:hi]}, 1)
        return y if y is not None and y.shape == ys else None

    if x.size < _SPLIT_ELEMS or n < 2 or num_threads() == 1:
        y = run(0, n)
    else:
        y = batch_shares(run, (n, c, *out), x.size)
    # checked without padding too: MLAS's 4x4 unpadded windows of -inf also gave the lowest value
    if y is not None and bool(np.equal(y, _LOWEST).any()):
        return None
    return y
