"""NumPy kernels of the activation rows (relu, sigmoid, softplus, gelu, silu)."""

from __future__ import annotations

import math

import numpy as np

from ..special import erf as _erf

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = 0.044715


def relu_backward(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    # grad except where out <= 0, so a NaN output passes its gradient on, as PyTorch's
    # threshold_backward; a multiply by the bool mask is several times faster than np.where
    return np.multiply(grad, ~np.less_equal(out, 0))


def sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + exp(-x)) overflows harmlessly to 0 for very negative x; silence that warning
    with np.errstate(over="ignore"):
        out = np.negative(x, out=np.empty_like(x))  # out= keeps 0-d results arrays
        np.exp(out, out=out)
        out += 1
        return np.reciprocal(out, out=out)


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)), stable for large |x|."""
    out = np.log1p(np.exp(-np.abs(x)))
    out += np.maximum(x, 0)
    return out


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    # the final astype: Python-float arithmetic widens bfloat16 arrays to float32
    if approximate == "tanh":
        inner = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x))
        return (0.5 * x * (1 + inner)).astype(x.dtype, copy=False)
    return (0.5 * x * (1 + _erf(x * x.dtype.type(_SQRT_HALF)))).astype(x.dtype, copy=False)


def gelu_backward(grad: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x2 * x))
        # d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3c x^2)
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_C * x2)
        return (grad * d).astype(x.dtype, copy=False)
    # d/dx x Phi(x) = Phi(x) + x phi(x)
    cdf = 0.5 * (1 + _erf(x * x.dtype.type(_SQRT_HALF)))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return (grad * (cdf + x * pdf)).astype(x.dtype, copy=False)


def silu_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = sigmoid(x)
    # d/dx x s(x) = s (1 + x (1 - s))
    return grad * (s * (1 + x * (1 - s)))
