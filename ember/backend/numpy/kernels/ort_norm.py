"""Layer norm's float32 forward on ONNX Runtime (issue 20).

ONNX's ``LayerNormalization`` (opset 17) on ORT's CPU kernel makes one pass over each row for
its mean and mean square (accumulated in float64) and one for the output, and gives the rows'
mean and 1 / sqrt(var + eps) as well: ``norm.py`` keeps those for the backward of the same
input. NumPy's form takes about six passes over the rows and broadcasts of short rows. At the
GPT bench's (1024, 128): 0.15 -> 0.09 ms a call on one core; the error to a float64 reference
is at most NumPy's (rows offset by 1e3-1e5 from zero: 0.5x NumPy's).

ORT's second thread lost on rows of fewer than ``_THREAD_ELEMS`` elements (0.10 -> 0.11 ms at
(1024, 128)) and won from there (0.34 -> 0.25 ms at (4096, 128), 1.05 -> 0.78 at (2048, 768)).
The graph takes any (R, C), so one session per epsilon and thread count serves every shape.
``EMBER_CONV=numpy``, a missing onnxruntime and anything but float32 keep NumPy's form.
"""

from __future__ import annotations

import numpy as np

from .onnx_proto import Dim, Node, model
from .ort_conv import _on, _run_into
from .threads import _call_threads

_THREAD_ELEMS = 1 << 18
_OPSETS = {"": 17}


def _layer_norm_graph(eps: float) -> bytes:
    """y (r, c), mean (r, 1), rstd (r, 1) of x (r, c) normalised over c, weight and bias (c,)."""
    attrs = {"axis": -1, "epsilon": eps}
    node = Node("LayerNormalization", ["x", "w", "b"], ["y", "mean", "rstd"], attrs)
    inputs = {"x": ("r", "c"), "w": ("c",), "b": ("c",)}
    outputs: dict[str, tuple[Dim, ...]] = {"y": ("r", "c"), "mean": ("r", 1), "rstd": ("r", 1)}
    return model([node], inputs, outputs, opsets=_OPSETS)


def layer_norm(
    x2: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(y (R, C), mean (R, 1), rstd (R, 1)) of float32 rows ``x2`` (R, C, C-ordered) with weight
    and bias (C,): y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) with the biased
    variance. None where the route is off (NumPy's form then runs).

    Example:
        >>> x = np.array([[1.0, 3.0]], np.float32)
        >>> out = layer_norm(x, np.ones(2, np.float32), np.zeros(2, np.float32), 0.0)
        >>> out is None or (out[0].tolist(), out[1].tolist()) == ([[-1.0, 1.0]], [[2.0]])
        True
    """
    if not _on(x2, w, b):
        return None
    rows = x2.shape[0]
    y = np.empty_like(x2)
    mean, rstd = np.empty((rows, 1), np.float32), np.empty((rows, 1), np.float32)
    threads = 1 if x2.size < _THREAD_ELEMS else _call_threads()
    feeds = {"x": x2, "w": w, "b": b}
    outputs = {"y": y, "mean": mean, "rstd": rstd}
    if not _run_into(_layer_norm_graph, (float(eps),), feeds, outputs, threads):
        return None
    return y, mean, rstd
