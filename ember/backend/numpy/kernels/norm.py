"""NumPy kernels of the fused normalisation rows: layer norm, RMS norm and batch norm (forwards).

Their backwards are the rows' generic rules (``ember/ops/nn.py``): fused NumPy ones measured no
faster (within 4%, bench/fused_backward.py).
"""

from __future__ import annotations

import numpy as np


def _norm_axes(ndim: int, count: int) -> tuple[int, ...]:
    return tuple(range(ndim - count, ndim))


def layer_norm(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, normalized_ndim: int, eps: float
) -> np.ndarray:
    xhat, _ = _standardize(x, _norm_axes(x.ndim, normalized_ndim), eps)
    xhat *= weight
    xhat += bias
    return xhat


def _standardize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(x - mean) * rstd over ``axes`` (biased variance), and rstd (keepdims)."""
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    xc = x - mean
    var = np.square(xc).mean(axis=axes, keepdims=True, dtype=x.dtype)
    rstd = 1 / np.sqrt(var + x.dtype.type(eps))
    xc *= rstd
    return xc, rstd


def _rms_scale(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    ms = np.square(x).mean(axis=axes, keepdims=True, dtype=x.dtype)
    return np.asarray(1 / np.sqrt(ms + x.dtype.type(eps)))


def rms_norm(x: np.ndarray, weight: np.ndarray, normalized_ndim: int, eps: float) -> np.ndarray:
    out = x * _rms_scale(x, _norm_axes(x.ndim, normalized_ndim), eps)
    out *= weight
    return out


def _channel_axes(ndim: int) -> tuple[int, ...]:
    return (0, *range(2, ndim))


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def batch_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    axes = _channel_axes(x.ndim)
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    xc = x - mean
    var = np.square(xc).mean(axis=axes, keepdims=True, dtype=x.dtype)
    alpha = _per_channel(weight, x.ndim) / np.sqrt(var + x.dtype.type(eps))
    shift = _per_channel(bias, x.ndim)
    if np.isfinite(alpha).all() and np.isfinite(shift).all() and np.isfinite(mean).all():
        xc *= alpha
        xc += shift
        return xc
    # a non-finite statistic or parameter (checked on the small per-channel arrays): PyTorch's
    # x * alpha + (bias - mean * alpha), whose NaN and inf differ from (x - mean) * alpha + bias
    out = x * alpha
    out += shift - mean * alpha
    return out
