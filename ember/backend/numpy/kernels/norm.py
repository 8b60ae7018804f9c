"""NumPy kernels of the fused normalisation rows: layer norm, RMS norm and batch norm.

Layer and RMS norm's backwards are the rows' generic rules (``ember/ops/nn.py``): fused NumPy
ones measured no faster (within 4%, bench/fused_backward.py). Batch norm has a fused backward
(``batch_norm_backward``): its per-channel sums over (N, H, W) are dot products of contiguous
rows, and it makes 3 full-size arrays where the rule makes about 10.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from types import NotImplementedType

import numpy as np

from .threads import _parallel_split

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


def _channel_sum(a: np.ndarray) -> np.ndarray:
    """sum(a) per channel of an (N, C, L) array, as (C,): a dot product with ones per (n, c)
    row when the rows are long (3x faster than the strided reduction over axes 0 and 2),
    else the reduction."""
    if a.shape[2] >= 32:
        return np.asarray(np.vecdot(a, np.ones(a.shape[2], a.dtype)).sum(axis=0))
    return np.asarray(a.sum(axis=(0, 2)))


def _rows3(a: np.ndarray) -> np.ndarray:
    """(N, C, *) -> a C-contiguous (N, C, L) view (a copy only for a non-contiguous input)."""
    return np.ascontiguousarray(a).reshape(a.shape[0], a.shape[1], -1)


def batch_stats(x: np.ndarray, correction: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, var)`` per channel of x (N, C, *), both (C,), the variance over ``count -
    correction``: a sum, the centred array and one dot product per (n, c) row (no transposed
    copy, no squared array). Right after ``batch_norm`` of the same array (a training step's
    running statistics) its statistics are reused: the same sums, not computed again."""
    x3 = _rows3(x)
    count = x3.shape[0] * x3.shape[2]
    if x.dtype not in _EXACT:
        flat = x3.transpose(1, 0, 2).reshape(x3.shape[1], -1)
        return flat.mean(axis=1, dtype=x.dtype), flat.var(axis=1, ddof=correction, dtype=x.dtype)
    last = getattr(_last, "stats", None)
    if last is not None and last[0]() is x:
        mean, sq = last[1], last[2]
    else:
        mean, sq = np.empty(x3.shape[1], x.dtype), np.empty(x3.shape[1], x.dtype)

        def run(lo: int, hi: int) -> None:
            mean[lo:hi], xc = _centred(x3[:, lo:hi])
            sq[lo:hi] = _channel_dot(xc, xc)

        _by_channels(x3, run)
    return mean, sq / x.dtype.type(count - correction)


_last = threading.local()  # .stats: (weakref to batch_norm's x, mean, centred sum of squares)


def _by_channels(x3: np.ndarray, fn: Callable[[int, int], None]) -> None:
    """``fn(lo, hi)`` on one share of the channels of an (N, C, L) array per pool thread, from
    ``_SPLIT_MIN`` elements (the BLAS serial only for rows long enough that OpenBLAS would
    thread their dot products)."""
    if x3.size < _SPLIT_MIN:
        fn(0, x3.shape[1])
        return
    _parallel_split(x3.shape[1], x3.size, fn, blas=x3.shape[2] > 8192)


# two shares were 10-50% slower than one up to 2 MiB of float32 (the pool's hand-off and the
# shared memory bandwidth), 1.3-1.9x faster from 4 MiB (2-core VM, bench-style A/B)
_SPLIT_MIN = 1 << 20


def _centred(x3: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean (C,) of an (N, C, L) array and the centred array ``x3 - mean`` (into
    ``out`` when given)."""
    mean = _channel_sum(x3) / x3.dtype.type(x3.shape[0] * x3.shape[2])
    return mean, np.subtract(x3, mean[:, None], out=out)


def batch_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * weight + bias with the batch's statistics per channel of
    x (N, C, *); float32 / float64 one channel share per pool thread."""
    if x.dtype not in _EXACT or x.ndim < 2 or not x.size:
        axes = _channel_axes(x.ndim)
        mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
        var = np.square(x - mean).mean(axis=axes, keepdims=True, dtype=x.dtype)
        return _affine_pytorch(x, mean, var, weight, bias, eps)
    f = x.dtype.type
    x3 = _rows3(x)
    out = np.empty_like(x3)
    c = x3.shape[1]
    mean, sq, finite = np.empty(c, x.dtype), np.empty(c, x.dtype), np.ones(c, bool)

    def run(lo: int, hi: int) -> None:
        xc = out[:, lo:hi]
        mean[lo:hi], _ = _centred(x3[:, lo:hi], out=xc)
        sq[lo:hi] = _channel_dot(xc, xc)
        alpha = weight[lo:hi] / np.sqrt(sq[lo:hi] / f(x3.shape[0] * x3.shape[2]) + f(eps))
        shift = bias[lo:hi]
        finite[lo:hi] = np.isfinite(alpha) & np.isfinite(shift) & np.isfinite(mean[lo:hi])
        if finite[lo:hi].all():
            xc *= alpha[:, None]
            xc += shift[:, None]

    _by_channels(x3, run)
    _last.stats = (weakref.ref(x), mean, sq)
    if finite.all():
        return out.reshape(x.shape)
    # a non-finite statistic or parameter (checked on the small per-channel arrays)
    var = sq / f(x3.shape[0] * x3.shape[2])
    return _affine_pytorch(
        x, _per_channel(mean, x.ndim), _per_channel(var, x.ndim), weight, bias, eps
    )


def _affine_pytorch(
    x: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    eps: float,
) -> np.ndarray:
    """PyTorch's x * alpha + (bias - mean * alpha), alpha = weight / sqrt(var + eps), with
    mean and var shaped per channel: its NaN and inf differ from (x - mean) * alpha + bias."""
    alpha = _per_channel(weight, x.ndim) / np.sqrt(var + x.dtype.type(eps))
    out = x * alpha
    out += _per_channel(bias, x.ndim) - mean * alpha
    return out


def batch_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | NotImplementedType:
    """(grad x, grad weight, grad bias) of ``batch_norm`` (batch statistics), float32/float64,
    one channel share per pool thread.

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
    c = x3.shape[1]
    gx = np.empty_like(x3)
    rstd, sg, sgx, finite = np.empty(c, x.dtype), np.empty(c, x.dtype), np.empty(c, x.dtype), [True]

    def run(lo: int, hi: int) -> None:
        xc, g = gx[:, lo:hi], g3[:, lo:hi]
        mean, _ = _centred(x3[:, lo:hi], out=xc)
        r = f(1) / np.sqrt(_channel_dot(xc, xc) / count + f(eps))
        s, sx = _channel_sum(g), _channel_dot(g, xc)
        k = r * weight[lo:hi]
        rstd[lo:hi], sg[lo:hi], sgx[lo:hi] = r, s, sx
        if not np.isfinite(np.concatenate([mean, r, k, s, sx])).all():
            finite[0] = False
            return
        xc *= (-(k * r * r * sx / count))[:, None]
        xc -= (k * s / count)[:, None]
        xc += np.multiply(g, k[:, None])

    _by_channels(x3, run)
    if not finite[0]:
        return NotImplemented
    return gx.reshape(x.shape), rstd * sgx, sg
