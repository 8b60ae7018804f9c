"""The NumPy backend's max-pool and ReLU kernels, forward and backward, against PyTorch's CPU
kernels and against the plain NumPy forms ember used before session 20 (issue 20).

Shapes: the first and second 2x2 pools of LeNet and of ``ember bench cnn`` (batch 64), ReLU on
the same inputs. Rows (microseconds, medians of ``--rounds`` alternating rounds, each arm timed
``--repeats`` calls in a block by ``_timing.alternating``) and the ratios ember / PyTorch and
ember / plain NumPy:

- ``max_pool2d``: ember (MLAS's pooling through ONNX Runtime where it takes the input) against
  ``F.max_pool2d`` and a copy plus ``np.maximum`` over the taps' strided views;
- ``max_pool2d_backward``: ember (the taps copied out once, then contiguous compares) against
  PyTorch's ``max_pool2d_with_indices_backward`` (indices from the forward, not timed) and the
  strided-view form;
- ``relu``: ember (``np.maximum`` against an array of zeros) against ``torch.relu`` and
  ``np.maximum(x, 0)``;
- ``relu_backward``: ember (a 0 / 1 float mask multiplied in place) against PyTorch's
  ``threshold_backward`` and a multiply by a bool mask.

Usage: taskset -c 0,1 python bench/pool_relu.py [--threads 1] [--rounds 5] [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

from _timing import alternating

Fn = Callable[[], object]
SHAPES = {
    "lenet-1": (64, 6, 28, 28),
    "lenet-2": (64, 16, 10, 10),
    "cnn-1": (64, 32, 28, 28),
    "cnn-2": (64, 32, 14, 14),
}


def _plain_forms() -> dict[str, Callable[..., object]]:
    """The plain NumPy forms: strided tap views, a scalar 0, a bool mask."""
    import numpy as np

    def taps(x: np.ndarray) -> list[np.ndarray]:
        return [x[:, :, i::2, j::2] for i in (0, 1) for j in (0, 1)]

    def pool(x: np.ndarray) -> np.ndarray:
        v = taps(x)
        y = v[0].copy()
        for t in v[1:]:
            np.maximum(y, t, out=y)
        return y

    def pool_backward(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        v = taps(x)
        best = pool(x)
        gx = np.empty_like(x)
        taken = None
        for i, t in enumerate(v):
            first = np.equal(t, best)
            if taken is not None:
                np.greater(first, taken, out=first)
            np.multiply(g, first, out=taps(gx)[i])
            taken = first if taken is None else np.logical_or(taken, first, out=taken)
        return gx

    return {
        "max_pool2d": pool,
        "max_pool2d_backward": pool_backward,
        "relu": lambda x: np.maximum(x, x.dtype.type(0)),
        "relu_backward": lambda g, out: np.multiply(g, ~np.less_equal(out, 0)),
    }


def _rows(
    b: Any, plain: dict[str, Callable[..., object]], x: Any, g: Any, gr: Any
) -> dict[str, tuple[Fn, Fn, Fn]]:
    """Each op's (ember, torch, plain NumPy) calls on a ReLU output ``x`` (N, C, H, W), a pool
    gradient ``g`` (N, C, H/2, W/2) and a ReLU gradient ``gr`` (x's shape)."""
    import torch

    aten = torch.ops.aten
    k = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1)}
    tx, tg, tgr = (torch.from_numpy(a) for a in (x, g, gr))
    _, idx = aten.max_pool2d_with_indices(tx, [2, 2], [2, 2])
    return {
        "max_pool2d": (
            lambda: b.max_pool2d(x, **k),
            lambda: torch.nn.functional.max_pool2d(tx, 2),
            lambda: plain["max_pool2d"](x),
        ),
        "max_pool2d_backward": (
            lambda: b.max_pool2d_backward(g, x, **k),
            lambda: aten.max_pool2d_with_indices_backward(
                tg, tx, [2, 2], [2, 2], [0, 0], [1, 1], False, idx
            ),
            lambda: plain["max_pool2d_backward"](g, x),
        ),
        "relu": (lambda: b.relu(x), lambda: torch.relu(tx), lambda: plain["relu"](x)),
        "relu_backward": (
            lambda: b.relu_backward(gr, x),
            lambda: aten.threshold_backward(tgr, tx, 0),
            lambda: plain["relu_backward"](gr, x),
        ),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    os.environ["EMBER_NUM_THREADS"] = str(args.threads)  # before ember loads
    import numpy as np
    import torch

    from ember.backend.numpy.backend import NumpyBackend

    torch.set_num_threads(args.threads)
    b = NumpyBackend()
    plain = _plain_forms()
    rng = np.random.default_rng(0)
    print(f"threads {args.threads}; microseconds; ratios ember / torch, ember / plain NumPy")
    for name, shape in SHAPES.items():
        x = np.maximum(rng.standard_normal(shape, dtype=np.float32), 0)  # a ReLU's output
        g = rng.standard_normal((*shape[:2], shape[2] // 2, shape[3] // 2), dtype=np.float32)
        gr = rng.standard_normal(shape, dtype=np.float32)
        rows = _rows(b, plain, x, g, gr)
        for op, arms in rows.items():
            times = alternating(list(arms), args.repeats, args.rounds, pause=0.0, turn=True)
            em, th, pl = (1e3 * statistics.median(t) for t in times)
            print(
                f"{name:8s} {op:20s} ember {em:7.0f}  torch {th:7.0f}  numpy {pl:7.0f}"
                f"  ratio torch {em / th:5.2f}  numpy {em / pl:5.2f}"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
