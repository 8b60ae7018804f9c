"""Exact GELU of float32 arrays on ONNX Runtime (issue 20).

``gelu_float32.py``'s polynomial takes about 30 NumPy passes an element; ONNX Runtime's fused
``com.microsoft`` ``Gelu`` (MLAS's vectorised erf, x / 2 (1 + erf(x / sqrt 2))) takes one, split
over its intra-op threads. The backward g (Phi(x) + x phi(x)) is a graph of eleven elementwise
nodes (this wheel has no ``GeluGrad``). On one core of the AVX2 dev VM, 524,288 elements (the
GPT bench's MLP activation): forward 3.5 -> 0.7 ms, backward 4.9 -> 1.3-1.6 ms.

Accuracy is PyTorch's: the same formula, whose 1 + erf cancels in the negative tail, so the
absolute error stays below 6e-7 everywhere (as the polynomial's) while the relative error there
grows: 2e-5 at x = -3, 6e-4 at -4, 7% at -5 (where GELU is -1.4e-6); the polynomial keeps 1e-5
relative there. Non-finite values as the polynomial: gelu(inf) = inf, gelu(-inf) = nan, the
gradient at +-inf nan (PyTorch 2.13 agrees; torch 2.11's AVX-512 kernel gives gelu(inf) = nan).

The graphs take a 1-d input of any length, so one session per thread count serves every shape.
``EMBER_CONV=numpy``, a missing onnxruntime, float64 and anything but float32 keep the
polynomial (or SciPy's erf for float64).
"""

from __future__ import annotations

import math

import numpy as np

from .onnx_proto import Node, model
from .ort_conv import _on, _run_into
from .threads import _call_threads

_MS = "com.microsoft"
_OPSETS = {"": 17, _MS: 1}


def _const(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


def _gelu_graph() -> bytes:
    """y (n,) = x Phi(x) for x (n,)."""
    node = Node("Gelu", ["x"], ["y"], domain=_MS)
    return model([node], {"x": ("n",)}, {"y": ("n",)}, opsets=_OPSETS)


def _gelu_backward_graph() -> bytes:
    """y (n,) = g (Phi(x) + x phi(x)) for x, g (n,), Phi = (1 + erf(x / sqrt 2)) / 2 and
    phi = exp(-x^2 / 2) / sqrt(2 pi). (Folding the halves into one variadic ``Sum`` of three
    ran 1.3x slower on one thread: its scalar broadcast is not vectorised.)"""
    nodes = [
        Node("Mul", ["x", "rsqrt2"], ["a"]),
        Node("Erf", ["a"], ["e"]),
        Node("Mul", ["e", "half"], ["eh"]),
        Node("Add", ["eh", "half"], ["cdf"]),
        Node("Mul", ["x", "x"], ["x2"]),
        Node("Mul", ["x2", "mhalf"], ["q"]),
        Node("Exp", ["q"], ["ex"]),
        Node("Mul", ["ex", "rsqrt2pi"], ["pdf"]),
        Node("Mul", ["pdf", "x"], ["xpdf"]),
        Node("Add", ["cdf", "xpdf"], ["d"]),
        Node("Mul", ["d", "g"], ["y"]),
    ]
    consts = {
        "rsqrt2": _const(math.sqrt(0.5)),
        "half": _const(0.5),
        "mhalf": _const(-0.5),
        "rsqrt2pi": _const(1.0 / math.sqrt(2.0 * math.pi)),
    }
    inputs = {"x": ("n",), "g": ("n",)}
    return model(nodes, inputs, {"y": ("n",)}, initializers=consts, opsets=_OPSETS)


def gelu(x: np.ndarray) -> np.ndarray | None:
    """Exact GELU of a float32 array (any shape) on ORT; None where the route is off.

    Example:
        >>> y = gelu(np.array([0.0, 1.0], np.float32))
        >>> y is None or bool(abs(y[1] - 0.8413447) < 1e-6)
        True
    """
    if not _on(x):
        return None
    y = np.empty(x.shape, dtype=np.float32)
    ran = _run_into(_gelu_graph, (), {"x": x.reshape(-1)}, {"y": y.reshape(-1)}, _call_threads())
    return y if ran else None


def gelu_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """grad (Phi(x) + x phi(x)) for float32 ``grad`` and ``x`` of one shape; None where the
    route is off."""
    if not _on(grad, x):
        return None
    y = np.empty(x.shape, dtype=np.float32)
    feeds = {"x": x.reshape(-1), "g": grad.reshape(-1)}
    ran = _run_into(_gelu_backward_graph, (), feeds, {"y": y.reshape(-1)}, _call_threads())
    return y if ran else None
