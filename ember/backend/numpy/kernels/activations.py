"""NumPy kernels of the activation rows (relu, sigmoid, softplus, gelu, silu)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..special import erf as _erf
from . import ort_gelu
from .gelu_float32 import gelu_backward_block, gelu_block
from .threads import _BLOCK_ELEMS, _parallel_split

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = 0.044715
# exact GELU of these dtypes runs in place in one buffer (out= keeps 0-d results arrays)
_EXACT = (np.dtype(np.float32), np.dtype(np.float64))


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0), NaN kept. Against an array of zeros, not a scalar 0: NumPy's SIMD ``maximum``
    loop takes two arrays only; with a scalar it ran 2x slower (116 against 58 us over 300 K
    float32, zeros included)."""
    out = np.zeros_like(x)
    return np.maximum(x, out, out=out)


def relu_backward(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    """grad except where out <= 0 (+0 there, whatever grad holds), so a NaN output passes its
    gradient on, as PyTorch's threshold_backward. A float gradient is selected bitwise: the
    compare's 0 / 1 bytes become an integer mask of grad's width (0 / -1: all bits set) and
    ANDed with grad's bits, so an infinite or NaN gradient the mask drops leaves no NaN and no
    warning. Three passes; 1.2x faster than a multiply by a 0 / 1 float mask, which also needs
    a NaN check of its product (np.where 10x slower)."""
    bits = _SAME_WIDTH.get(grad.dtype.itemsize)
    if grad.dtype.kind != "f" or grad.shape != out.shape or bits is None:
        return np.where(np.less_equal(out, 0), np.zeros((), grad.dtype), grad)
    drop = np.less_equal(out, 0).view(np.int8)  # 1 where the gradient is dropped
    keep = np.empty(grad.shape, bits)
    np.subtract(drop, 1, out=keep, casting="unsafe")  # int8 0 / -1, widened in the loop
    return np.bitwise_and(grad.view(bits), keep, out=keep).view(grad.dtype)


# the signed integer of each float width: relu_backward's bitwise select
_SAME_WIDTH: dict[int, np.dtype[Any]] = {
    2: np.dtype(np.int16),
    4: np.dtype(np.int32),
    8: np.dtype(np.int64),
}


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


_Run = Callable[[Callable[[int, int], None]], None]


def _blocks(x: np.ndarray, *more: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], _Run]:
    """(out, flat inputs, run): C-contiguous flat views of ``x`` and ``more`` and a fresh flat
    output; ``run(fn)`` calls ``fn(lo, hi)`` over cache-sized element blocks, split between the
    kernel pool's threads (each block's passes then stay in cache)."""
    flats = [np.ascontiguousarray(a).reshape(-1) for a in (x, *more)]
    n = flats[0].size
    out = np.empty(n, dtype=x.dtype)
    count = -(-n // _BLOCK_ELEMS)

    def run(fn: Callable[[int, int], None]) -> None:
        def share(lo: int, hi: int) -> None:
            for b in range(lo, hi):
                fn(b * _BLOCK_ELEMS, min((b + 1) * _BLOCK_ELEMS, n))

        _parallel_split(count, n, share, blas=False)

    return out, flats, run


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)) in x's dtype (float32: ``gelu_float32``; float64: SciPy's
    erf), in place per block."""
    out, (xf,), run = _blocks(x)
    f = x.dtype.type
    if f is np.float32:
        run(lambda lo, hi: gelu_block(xf[lo:hi], out[lo:hi]))
        return out.reshape(x.shape)

    def block(lo: int, hi: int) -> None:
        t, xb = out[lo:hi], xf[lo:hi]
        np.multiply(xb, f(_SQRT_HALF), out=t)
        _erf(t, out=t)
        t += 1
        t *= xb
        t *= f(0.5)

    run(block)
    return out.reshape(x.shape)


def _gelu_exact_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    """grad (Phi(x) + x phi(x)), Phi and phi the normal CDF and density, per block."""
    out, (xf, gf), run = _blocks(x, grad)
    f = x.dtype.type
    if f is np.float32:
        run(lambda lo, hi: gelu_backward_block(xf[lo:hi], gf[lo:hi], out[lo:hi]))
        return out.reshape(x.shape)

    def block(lo: int, hi: int) -> None:
        cdf, xb = out[lo:hi], xf[lo:hi]
        np.multiply(xb, f(_SQRT_HALF), out=cdf)
        _erf(cdf, out=cdf)
        cdf += 1
        cdf *= f(0.5)
        pdf = np.square(xb)
        pdf *= f(-0.5)
        np.exp(pdf, out=pdf)
        pdf *= xb
        pdf *= f(_INV_SQRT_2PI)
        cdf += pdf
        cdf *= gf[lo:hi]

    run(block)
    return out.reshape(x.shape)


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    # the final astype: Python-float arithmetic widens bfloat16 arrays to float32
    if approximate == "tanh":
        inner = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x))
        return (0.5 * x * (1 + inner)).astype(x.dtype, copy=False)
    if x.dtype in _EXACT:
        y = ort_gelu.gelu(x) if x.dtype == np.float32 else None
        return _gelu_exact(x) if y is None else y
    return (0.5 * x * (1 + _erf(x * x.dtype.type(_SQRT_HALF)))).astype(x.dtype, copy=False)


def gelu_backward(grad: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x2 * x))
        # d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3c x^2)
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_C * x2)
        return (grad * d).astype(x.dtype, copy=False)
    # d/dx x Phi(x) = Phi(x) + x phi(x)
    if x.dtype in _EXACT and grad.dtype == x.dtype and grad.shape == x.shape:
        d = ort_gelu.gelu_backward(grad, x) if x.dtype == np.float32 else None
        return _gelu_exact_backward(grad, x) if d is None else d
    cdf = 0.5 * (1 + _erf(x * x.dtype.type(_SQRT_HALF)))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return (grad * (cdf + x * pdf)).astype(x.dtype, copy=False)


def silu_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = sigmoid(x)
    # d/dx x s(x) = s (1 + x (1 - s))
    return grad * (s * (1 + x * (1 - s)))
