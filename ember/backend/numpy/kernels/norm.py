"""NumPy kernels of the fused normalisation rows: layer norm, RMS norm and batch norm.

Layer norm's forward and fused backward see x as (R, C) rows and take their row sums as dot
products; RMS norm's backward is the row's generic rule
(``ember/ops/nn.py``). Batch norm has a fused backward
(``batch_norm_backward``) that makes 3 full-size arrays where the rule makes about 10. Both batch
norm kernels see x (N, C, *) as an (N, C * L) array: its per-channel sums are rows added or dot
products of contiguous rows, and a per-channel factor is a (C * L,) row broadcast over the N rows
(2-2.5x faster than a (C, 1) column over (N, C, L), measured at the ResNet and DCGAN shapes).
"""

from __future__ import annotations

from collections.abc import Callable
from types import NotImplementedType

import numpy as np

from . import ort_norm
from .memo import Memo
from .threads import _parallel_split

_EXACT = (np.dtype(np.float32), np.dtype(np.float64))  # computed by the fused kernels below


def _norm_axes(ndim: int, count: int) -> tuple[int, ...]:
    return tuple(range(ndim - count, ndim))


def layer_norm(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, normalized_ndim: int, eps: float
) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last ``normalized_ndim`` dims."""
    rows = _norm_rows(x, weight, bias, normalized_ndim)
    if rows is None:
        xhat, _ = _standardize(x, _norm_axes(x.ndim, normalized_ndim), eps)
        xhat *= weight
        xhat += bias
        return xhat
    x2, w, b = rows
    fused = ort_norm.layer_norm(x2, w, b, eps)
    if fused is not None:
        y, mean, rstd2 = fused
        _row_kept.put(x, (normalized_ndim, eps), (mean, rstd2))
        return y.reshape(x.shape)
    xc, rstd = _row_stats(x2, eps)
    out = np.multiply(xc, np.multiply.outer(rstd, w), out=xc)
    out += b
    return out.reshape(x.shape)


# each live array ``layer_norm`` normalised on ORT: its rows' (mean, rstd), both (R, 1), which
# the backward of the same array reads instead of summing the rows again
_row_kept = Memo()


def _backward_stats(
    x: np.ndarray, x2: np.ndarray, w: np.ndarray, b: np.ndarray, normalized_ndim: int, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """(x - mean (R, C), rstd (R,)) for the backward: from the statistics the forward kept, or
    from the same ORT kernel run again (a recomputed or copied input), so that the bits do not
    depend on which; NumPy's own where ORT is off."""
    kept = _row_kept.get(x, (normalized_ndim, eps))
    if kept is None:
        fused = ort_norm.layer_norm(x2, w, b, eps)
        kept = None if fused is None else fused[1:]
    if kept is None:
        return _row_stats(x2, eps)
    mean, rstd2 = kept
    return np.subtract(x2, mean), rstd2.reshape(-1)


def _norm_rows(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, normalized_ndim: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """x as (R, C) rows with the weight and bias as (C,), for the fused layer-norm kernels;
    None (the generic path) for other dtypes or shapes."""
    if x.dtype not in _EXACT or not x.size or not normalized_ndim:
        return None
    width = int(np.prod(x.shape[x.ndim - normalized_ndim :]))
    trailing = x.shape[x.ndim - normalized_ndim :]
    if weight.dtype != x.dtype or bias.dtype != x.dtype:
        return None
    if weight.shape != trailing or bias.shape != trailing:
        return None
    x2 = np.ascontiguousarray(x).reshape(-1, width)
    return x2, weight.reshape(width), bias.reshape(width)


def _row_stats(x2: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(x - mean, rstd) of (R, C) rows: the centred rows (a new array) and 1 / sqrt(var + eps)
    (R,), the biased variance; the row sums are dot products (4x faster than NumPy's
    reductions over the last axis at GPT's (1024, 128))."""
    f = x2.dtype.type
    width = x2.shape[1]
    mean = _row_dot(x2, np.ones(width, x2.dtype)) / f(width)
    xc = np.subtract(x2, mean[:, None])
    rstd = f(1) / np.sqrt(_row_dot(xc, xc) / f(width) + f(eps))
    return xc, rstd


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum(a * b) per row of an (R, C) array and another or a (C,) row, as (R,): one dot product
    per row, or for short rows (where a call per row costs more) the product's row sums. A
    row's result never depends on the other rows (BLAS matrix-vector products group rows by
    fours, so a row's bits would change with the batch size)."""
    if a.shape[1] >= 32:
        return np.asarray(np.vecdot(a, b))
    return np.asarray(np.multiply(a, b).sum(axis=1))


def layer_norm_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    normalized_ndim: int,
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | NotImplementedType:
    """(grad x, grad weight, grad bias) of ``layer_norm``, float32/float64.

    Per row, with xc = x - mean, rstd = 1 / sqrt(var + eps), gh = grad * weight, m0 = mean(gh)
    and s1 = mean(gh * xc): grad x = gh rstd - xc rstd^3 s1 - m0 rstd (the rule's (gh - xhat
    mean(gh xhat) - m0) rstd with xhat = xc rstd); grad weight = sum over rows of grad * xc *
    rstd, grad bias = sum of grad. The row sums against the weight are dot products with it and
    the sums over rows matrix-vector products, so gh and xhat are never made. A non-finite
    statistic or mean (checked on the per-row values) declines: the row's rule then gives
    PyTorch's NaN and inf placement.
    """
    rows = _norm_rows(x, weight, bias, normalized_ndim)
    if rows is None or grad.dtype != x.dtype or grad.shape != x.shape:
        return NotImplemented
    x2, w, b = rows
    f = x2.dtype.type
    n, width = x2.shape
    g2 = np.ascontiguousarray(grad).reshape(n, width)
    xc, rstd = _backward_stats(x, x2, w, b, normalized_ndim, eps)
    gxc = np.multiply(g2, xc)
    m0, s1 = _row_dot(g2, w) / f(width), _row_dot(gxc, w) / f(width)
    if not np.isfinite(m0 + s1 + rstd).all():
        return NotImplemented
    gw = rstd @ gxc
    gb = np.ones(n, x2.dtype) @ g2
    gx = np.multiply(g2, np.multiply.outer(rstd, w), out=gxc)
    xc *= (rstd * rstd * rstd * s1)[:, None]
    gx -= xc
    gx -= (m0 * rstd)[:, None]
    return gx.reshape(x.shape), gw.reshape(weight.shape), gb.reshape(bias.shape)


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


def _channel_sum(a: np.ndarray, length: int) -> np.ndarray:
    """sum(a) per channel of an (N, C * L) share (channels of L contiguous values, the share's
    rows C * L apart), as (C,): a dot product with ones per (n, c) row for long rows, else the
    N rows added, then each channel's L column sums; 1.5-7x faster than NumPy's reduction over
    (N, L). A channel's sum has the same bits whatever share it is in (BLAS matrix-vector
    products would group rows by fours and differ by share)."""
    n = a.shape[0]
    if length >= 256:
        ones = np.ones(length, a.dtype)
        return _add_rows(np.vecdot(a.reshape(n, -1, length), ones))
    return np.asarray(_add_rows(a).reshape(-1, length).sum(axis=1))


def _channel_dot(a: np.ndarray, b: np.ndarray, length: int) -> np.ndarray:
    """sum(a * b) per channel of two (N, C * L) shares, as (C,): one dot product per (n, c) row
    when the rows are long (no product array), else the product's ``_channel_sum``."""
    if length >= 64:
        n = a.shape[0]
        return _add_rows(np.vecdot(a.reshape(n, -1, length), b.reshape(n, -1, length)))
    return _channel_sum(np.multiply(a, b), length)


def _add_rows(a: np.ndarray) -> np.ndarray:
    """The N rows of an (N, W) array added one after another, as (W,). NumPy adds a single
    column pairwise instead, which would give a one-channel share other bits than the channel
    in a wider share: that column gets a zero column beside it."""
    if a.shape[1] == 1:
        return np.asarray(np.concatenate([a, np.zeros_like(a)], axis=1).sum(axis=0)[:1])
    return np.asarray(a.sum(axis=0))


def _spread(v: np.ndarray, length: int) -> np.ndarray:
    """A per-channel vector (C,) as the (C * L,) row that broadcasts over the N rows of an
    (N, C * L) share: elementwise work 2-2.5x faster than a (C, 1) vector over (N, C, L), whose
    broadcast makes NumPy's inner loop L values long."""
    return np.repeat(v, length)


def _rows2(a: np.ndarray) -> np.ndarray:
    """(N, C, *) -> a C-contiguous (N, C * L) view (a copy only for a non-contiguous input); the
    channel share ``[lo, hi)`` is the column slice ``[lo * L, hi * L)``."""
    return np.ascontiguousarray(a).reshape(a.shape[0], -1)


def _length(x: np.ndarray) -> int:
    """L, the values per (n, c) row of an (N, C, *) array."""
    return x.size // (x.shape[0] * x.shape[1]) if x.size else 0


def batch_stats(x: np.ndarray, correction: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, var)`` per channel of x (N, C, *), both (C,), the variance over ``count -
    correction``: a sum, the centred array and one dot product per (n, c) row (no transposed
    copy, no squared array). For an array ``batch_norm`` normalised (a training step's running
    statistics) its statistics are reused: the same sums, not computed again."""
    length, c = _length(x), x.shape[1]
    count = x.shape[0] * length
    if x.dtype not in _EXACT:
        flat = x.reshape(x.shape[0], c, -1).transpose(1, 0, 2).reshape(c, -1)
        return flat.mean(axis=1, dtype=x.dtype), flat.var(axis=1, ddof=correction, dtype=x.dtype)
    known = _recalled(x)
    if known is not None:
        mean, sq = known
    else:
        x2 = _rows2(x)
        mean, sq = np.empty(c, x.dtype), np.empty(c, x.dtype)

        def run(lo: int, hi: int) -> None:
            mean[lo:hi], xc = _centred(x2[:, lo * length : hi * length], length)
            sq[lo:hi] = _channel_dot(xc, xc, length)

        _by_channels(x2, c, length, run)
    return mean, sq / x.dtype.type(count - correction)


# the statistics of each live array ``batch_norm`` normalised: (mean, centred sum of squares),
# both (C,). ``batch_stats`` and ``batch_norm_backward`` of the same array read them instead of
# summing x again (the backward then makes 6 passes over x, not 8)
_stats = Memo()


def _recalled(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``batch_norm``'s (mean, centred sum of squares) of this very array, or None."""
    known: tuple[np.ndarray, np.ndarray] | None = _stats.get(x, ())
    return known


def _by_channels(x2: np.ndarray, c: int, length: int, fn: Callable[[int, int], None]) -> None:
    """``fn(lo, hi)`` on one share of the C channels of an (N, C * L) array per pool thread, from
    ``_SPLIT_MIN`` elements (the BLAS serial only for rows long enough that OpenBLAS would
    thread their dot products)."""
    if x2.size < _SPLIT_MIN:
        fn(0, c)
        return
    _parallel_split(c, x2.size, fn, blas=length > 8192)


# two shares were 10-50% slower than one up to 2 MiB of float32 (the pool's hand-off and the
# shared memory bandwidth), 1.3-1.9x faster from 4 MiB (2-core VM, bench-style A/B)
_SPLIT_MIN = 1 << 20


def _centred(
    x: np.ndarray, length: int, out: np.ndarray | None = None, mean: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean (C,) of an (N, C * L) share (``mean`` when known) and the centred share
    ``x - mean`` (into ``out`` when given)."""
    if mean is None:
        mean = _channel_sum(x, length) / x.dtype.type(x.shape[0] * length)
    return mean, np.subtract(x, _spread(mean, length), out=out)


def batch_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * weight + bias with the batch's statistics per channel of
    x (N, C, *); float32 / float64 one channel share per pool thread."""
    if x.dtype not in _EXACT or x.ndim < 2 or not x.size:
        axes = _channel_axes(x.ndim)
        mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
        var = np.square(x - mean).mean(axis=axes, keepdims=True, dtype=x.dtype)
        return _affine_pytorch(x, mean, var, weight, bias, eps)
    f = x.dtype.type
    x2, length, c = _rows2(x), _length(x), x.shape[1]
    count = f(x.shape[0] * length)
    out = np.empty_like(x2)
    mean, sq, finite = np.empty(c, x.dtype), np.empty(c, x.dtype), np.ones(c, bool)

    def run(lo: int, hi: int) -> None:
        cols = slice(lo * length, hi * length)
        xc = out[:, cols]
        mean[lo:hi], _ = _centred(x2[:, cols], length, out=xc)
        sq[lo:hi] = _channel_dot(xc, xc, length)
        alpha = weight[lo:hi] / np.sqrt(sq[lo:hi] / count + f(eps))
        shift = bias[lo:hi]
        finite[lo:hi] = np.isfinite(alpha) & np.isfinite(shift) & np.isfinite(mean[lo:hi])
        if finite[lo:hi].all():
            xc *= _spread(alpha, length)
            xc += _spread(shift, length)

    _by_channels(x2, c, length, run)
    _stats.put(x, (), (mean, sq))
    if finite.all():
        return out.reshape(x.shape)
    # a non-finite statistic or parameter (checked on the small per-channel arrays)
    var = sq / count
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
    x2, g2, length, c = _rows2(x), _rows2(grad), _length(x), x.shape[1]
    count = f(x.shape[0] * length)
    gx = np.empty_like(x2)
    rstd, sg, sgx, finite = np.empty(c, x.dtype), np.empty(c, x.dtype), np.empty(c, x.dtype), [True]
    known = _recalled(x)  # the forward's statistics: the same bits as summing x again

    def run(lo: int, hi: int) -> None:
        cols = slice(lo * length, hi * length)
        xc, g = gx[:, cols], g2[:, cols]
        mean, _ = _centred(x2[:, cols], length, xc, None if known is None else known[0][lo:hi])
        sq = _channel_dot(xc, xc, length) if known is None else known[1][lo:hi]
        r = f(1) / np.sqrt(sq / count + f(eps))
        s, sx = _channel_sum(g, length), _channel_dot(g, xc, length)
        k = r * weight[lo:hi]
        rstd[lo:hi], sg[lo:hi], sgx[lo:hi] = r, s, sx
        if not np.isfinite(np.concatenate([mean, r, k, s, sx])).all():
            finite[0] = False
            return
        xc *= _spread(-(k * r * r * sx / count), length)
        xc -= _spread(k * s / count, length)
        xc += np.multiply(g, _spread(k, length))

    _by_channels(x2, c, length, run)
    if not finite[0]:
        return NotImplemented
    return gx.reshape(x.shape), rstd * sgx, sg
