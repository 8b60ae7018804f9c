"""NumPy kernels of the fused normalisation rows: layer norm, RMS norm and batch norm."""

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


def _sum_over(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return a.sum(axis=axes) if axes else a


def _norm_backward(
    grad: np.ndarray,
    xhat: np.ndarray,
    scale: np.ndarray,
    weight: np.ndarray,
    axes: tuple[int, ...],
    param_axes: tuple[int, ...],
    center: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of y = xhat * w (+ b), where xhat = (x - [mean]) * scale normalises over ``axes``.

    Returns (gx, gw), gw summed over ``param_axes``; the bias gradient, where there is a bias, is
    ``_sum_over(grad, param_axes)``, left to the callers that need it.
    """
    gw = _sum_over(grad * xhat, param_axes)
    gxhat = grad * weight
    # d xhat: scale * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)); no mean term for RMS
    proj = (gxhat * xhat).mean(axis=axes, keepdims=True, dtype=grad.dtype)
    gx = gxhat - xhat * proj
    if center:
        gx -= gxhat.mean(axis=axes, keepdims=True, dtype=grad.dtype)
    gx *= scale
    return gx, gw


def _lead_axes(ndim: int, count: int) -> tuple[int, ...]:
    return tuple(range(ndim - count))


def layer_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, normalized_ndim: int, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    axes = _norm_axes(x.ndim, normalized_ndim)
    xhat, rstd = _standardize(x, axes, eps)
    lead = _lead_axes(x.ndim, normalized_ndim)
    gx, gw = _norm_backward(grad, xhat, rstd, weight, axes, lead, center=True)
    return gx, gw, _sum_over(grad, lead)


def _rms_scale(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    ms = np.square(x).mean(axis=axes, keepdims=True, dtype=x.dtype)
    return np.asarray(1 / np.sqrt(ms + x.dtype.type(eps)))


def rms_norm(x: np.ndarray, weight: np.ndarray, normalized_ndim: int, eps: float) -> np.ndarray:
    out = x * _rms_scale(x, _norm_axes(x.ndim, normalized_ndim), eps)
    out *= weight
    return out


def rms_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, normalized_ndim: int, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    axes = _norm_axes(x.ndim, normalized_ndim)
    scale = _rms_scale(x, axes, eps)
    lead = _lead_axes(x.ndim, normalized_ndim)
    return _norm_backward(grad, x * scale, scale, weight, axes, lead, center=False)


def _channel_axes(ndim: int) -> tuple[int, ...]:
    return (0, *range(2, ndim))


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def batch_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    xhat, _ = _standardize(x, _channel_axes(x.ndim), eps)
    xhat *= _per_channel(weight, x.ndim)
    xhat += _per_channel(bias, x.ndim)
    return xhat


def batch_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    axes = _channel_axes(x.ndim)
    xhat, rstd = _standardize(x, axes, eps)
    w = _per_channel(weight, x.ndim)
    gx, gw = _norm_backward(grad, xhat, rstd, w, axes, axes, center=True)
    return gx, gw, _sum_over(grad, axes)
