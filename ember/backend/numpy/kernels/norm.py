"""NumPy kernels of the fused normalisation rows: layer norm, RMS norm and batch norm.

Layer and RMS norm's backwards are the rows' generic rules (``ember/ops/nn.py``): fused NumPy
ones measured no faster (within 4%, bench/fused_backward.py). Batch norm has a fused backward
(``batch_norm_backward``): its per-channel sums over (N, H, W) are dot products of contiguous
rows, and it makes 3 full-size arrays where the rule makes about 10.
"""

from __future__ import annotations

from types import NotImplementedType

import numpy as np

_EXACT = (np.dtype(np.float32), np.dtype(np.float64))  # computed by the fused kernels below


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


def _channel_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum(a * b) per channel of (N, C, L) arrays, as (C,): one dot product per (n, c) row when
    the rows are long (no product array), else the product summed."""
    if a.shape[2] >= 32:
        return np.asarray(np.vecdot(a, b).sum(axis=0))
    return np.asarray(np.multiply(a, b).sum(axis=(0, 2)))


def _rows3(a: np.ndarray) -> np.ndarray:
    """(N, C, *) -> a C-contiguous (N, C, L) view (a copy only for a non-contiguous input)."""
    return np.ascontiguousarray(a).reshape(a.shape[0], a.shape[1], -1)


def batch_stats(x: np.ndarray, correction: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, var)`` per channel of x (N, C, *), both (C,), the variance over ``count -
    correction``: a sum, the centred array and one dot product per (n, c) row (no transposed
    copy, no squared array)."""
    x3 = _rows3(x)
    count = x3.shape[0] * x3.shape[2]
    if x.dtype not in _EXACT:
        flat = x3.transpose(1, 0, 2).reshape(x3.shape[1], -1)
        return flat.mean(axis=1, dtype=x.dtype), flat.var(axis=1, ddof=correction, dtype=x.dtype)
    mean, xc = _centred(x3)
    return mean, _channel_dot(xc, xc) / x.dtype.type(count - correction)


def _centred(x3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean (C,) of an (N, C, L) array and the centred array ``x3 - mean``."""
    mean = x3.sum(axis=(0, 2)) / x3.dtype.type(x3.shape[0] * x3.shape[2])
    return mean, x3 - mean[:, None]


def batch_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    axes = _channel_axes(x.ndim)
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    xc = x - mean
    if x.dtype in _EXACT and x.ndim >= 2 and x.size:
        # the centred sum of squares as dot products (no squared array)
        count = x.size // x.shape[1]
        var = _per_channel(_channel_dot(_rows3(xc), _rows3(xc)) / x.dtype.type(count), x.ndim)
    else:
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


def batch_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | NotImplementedType:
    """(grad x, grad weight, grad bias) of ``batch_norm`` (batch statistics), float32/float64.

    With xc = x - mean, r = 1 / sqrt(var + eps), n values per channel, sg = sum(g) and
    sgx = sum(g * xc) per channel: grad x = w r (g - sg / n - xc r^2 sgx / n), grad w = r sgx,
    grad b = sg. A non-finite statistic, weight or sum (checked on the per-channel values)
    declines, so the row's rule gives PyTorch's NaN and inf placement.
    """
    if x.dtype not in _EXACT or grad.dtype != x.dtype or grad.shape != x.shape or x.ndim < 2:
        return NotImplemented
    if not x.size or weight.dtype != x.dtype:
        return NotImplemented
    f = x.dtype.type
    x3, g3 = _rows3(x), _rows3(grad)
    count = f(x3.shape[0] * x3.shape[2])
    mean, xc = _centred(x3)
    rstd = f(1) / np.sqrt(_channel_dot(xc, xc) / count + f(eps))
    sg = g3.sum(axis=(0, 2))
    sgx = _channel_dot(g3, xc)
    k = rstd * weight
    small = np.concatenate([mean, rstd, k, sg, sgx])
    if not np.isfinite(small).all():
        return NotImplemented
    xc *= (-(k * rstd * rstd * sgx / count))[:, None]
    gx = np.multiply(g3, k[:, None])
    gx += xc
    gx -= (k * sg / count)[:, None]
    return gx.reshape(x.shape), rstd * sgx, sg
