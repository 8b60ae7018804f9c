"""NumPy kernels of the neural-network rows (activations, fused softmax/norm/loss, conv, pooling).

The ``NumpyBackend`` methods in its "nn kernels" section call these functions. Convolutions use an
im2col layout (C*kh*kw, N*Ho*Wo) filled by one strided slice copy per kernel tap (several times
faster than copying an ``as_strided`` window view, whose innermost runs are only kw long) and one
matrix product per group; input gradients scatter the columns back with one strided add per
tap. Row-wise kernels over large arrays (softmax, log-softmax, cross-entropy) process cache-sized
row blocks on a small thread pool (NumPy releases the GIL inside ufuncs); ``EMBER_NUM_THREADS``
sets its size.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .special import erf as _erf

Pair = tuple[int, int]
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = 0.044715
_BLOCK_ELEMS = 1 << 17  # elements per row block: 512 KiB of float32, inside L2
_PARALLEL_MIN = 1 << 16  # below this many elements one thread is faster
_SHIFT_LIMIT = 32.0  # |shift| up to here rounds to float32 within 2e-6
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def num_threads() -> int:
    """Threads for the row-blocked kernels: ``EMBER_NUM_THREADS``, else the CPU count (max 8)."""
    env = os.environ.get("EMBER_NUM_THREADS")
    if env:
        return max(1, int(env))
    return _CPU_THREADS


_CPU_THREADS = max(1, min(os.cpu_count() or 1, 8))  # read once: kernels ask on every call


def _parallel_rows(rows: int, cols: int, fn: Callable[[int, int], None]) -> None:
    """Call ``fn(lo, hi)`` over cache-sized row blocks of ``range(rows)`` on a thread pool."""
    block = max(1, _BLOCK_ELEMS // max(cols, 1))
    n = num_threads()
    if n == 1 or rows * cols < _PARALLEL_MIN or rows < 2:
        for lo in range(0, rows, block):
            fn(lo, min(lo + block, rows))
        return
    pool = _get_pool()
    per = -(-rows // n)

    def work(start: int) -> None:
        stop = min(start + per, rows)
        for lo in range(start, stop, block):
            fn(lo, min(lo + block, stop))

    futures = [pool.submit(work, s) for s in range(per, rows, per)]
    work(0)  # the calling thread takes the first share
    for f in futures:
        f.result()


_serial = threading.local()  # set inside pool tasks that must not split their work again


def _parallel_split(n: int, elems: int, fn: Callable[[int, int], None]) -> None:
    """Call ``fn(lo, hi)`` on one contiguous share of ``range(n)`` per thread (``elems``: the
    total work in elements, below ``_PARALLEL_MIN`` it all runs on the calling thread)."""
    threads = min(num_threads(), n)
    if threads <= 1 or elems < _PARALLEL_MIN or getattr(_serial, "on", False):
        fn(0, n)
        return
    per = -(-n // threads)
    futures = [_get_pool().submit(fn, lo, min(lo + per, n)) for lo in range(per, n, per)]
    fn(0, per)
    for f in futures:
        f.result()


def _get_pool() -> ThreadPoolExecutor:
    global _pool, _pool_size
    n = num_threads()
    if _pool is None or _pool_size != n:
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ember-np")
        _pool_size = n
    return _pool


def _as_rows(x: np.ndarray, dim: int) -> np.ndarray | None:
    """``x`` as a C-contiguous (R, C) view when ``dim`` is its last axis, else ``None``."""
    if dim != x.ndim - 1 or not x.flags.c_contiguous or x.ndim == 0:
        return None
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


# ---------------------------------------------------------------- activations
def relu_backward(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    # a multiply by the bool mask is several times faster than np.where with a scalar
    return np.multiply(grad, out > 0)


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


# ---------------------------------------------------------------- softmax family
def _exp_rows(xb: np.ndarray, out: np.ndarray, ones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """exp(x - shift) of a (B, C) block into ``out``; returns the row sums and the shifts.

    Fast path: shift 0, exp(x) unshifted and a BLAS row sum (x @ ones), which skips the max and
    subtract passes. It is exact wherever the sum stays a normal finite float (no element above
    ~88, one at least near -70); the other rows are redone shifted by their max.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        np.exp(xb, out=out)
        s = out @ ones
    shift = np.zeros(xb.shape[0], dtype=xb.dtype)
    bad = ~(np.isfinite(s) & (s >= 1e-30))
    if bad.any():
        rows = xb[bad]
        m = rows.max(axis=1)
        e = np.exp(rows - m[:, None])
        out[bad] = e
        s[bad] = e @ ones
        shift[bad] = m
    return s, shift


def softmax(x: np.ndarray, dim: int) -> np.ndarray:
    if x.size == 0:
        return np.empty_like(x)
    rows = _as_rows(x, dim)
    if rows is None:
        # shift by the max so exp cannot overflow
        out = np.subtract(x, x.max(axis=dim, keepdims=True))
        np.exp(out, out=out)
        out /= out.sum(axis=dim, keepdims=True)
        return out
    out = np.empty_like(rows)
    ones = np.ones(rows.shape[1], dtype=rows.dtype)

    def block(lo: int, hi: int) -> None:
        o = out[lo:hi]
        s, _ = _exp_rows(rows[lo:hi], o, ones)
        o *= np.reciprocal(s)[:, None]

    _parallel_rows(rows.shape[0], rows.shape[1], block)
    return out.reshape(x.shape)


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    if x.size == 0:
        return np.empty_like(x)
    rows = _as_rows(x, dim)
    if rows is None:
        shifted = np.subtract(x, x.max(axis=dim, keepdims=True))
        lse = np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        shifted -= lse
        return shifted
    out = np.empty_like(rows)
    ones = np.ones(rows.shape[1], dtype=rows.dtype)

    def block(lo: int, hi: int) -> None:
        xb = rows[lo:hi]
        o = out[lo:hi]
        s, shift = _exp_rows(xb, o, ones)  # o holds exp values only until overwritten below
        lse = np.log(s)
        lse += shift
        np.subtract(xb, lse[:, None], out=o)

    _parallel_rows(rows.shape[0], rows.shape[1], block)
    return out.reshape(x.shape)


def softmax_backward(grad: np.ndarray, out: np.ndarray, dim: int) -> np.ndarray:
    # d softmax: y * (g - sum(g * y))
    rows, grows = _as_rows(out, dim), _as_rows(grad, dim)
    if rows is None or grows is None:
        gx = grad * out
        gx -= out * gx.sum(axis=dim, keepdims=True)
        return gx
    gx = np.empty_like(rows)

    ones = np.ones(rows.shape[1], dtype=rows.dtype)

    def block(lo: int, hi: int) -> None:
        o, y, g = gx[lo:hi], rows[lo:hi], grows[lo:hi]
        np.multiply(g, y, out=o)
        # y * (g - sum(g * y)), the row sum as a BLAS product
        np.subtract(g, (o @ ones)[:, None], out=o)
        o *= y

    _parallel_rows(rows.shape[0], rows.shape[1], block)
    return gx.reshape(out.shape)


def log_softmax_backward(grad: np.ndarray, out: np.ndarray, dim: int) -> np.ndarray:
    # d log_softmax: g - exp(y) * sum(g)
    rows, grows = _as_rows(out, dim), _as_rows(grad, dim)
    if rows is None or grows is None:
        gx = np.exp(out)
        gx *= grad.sum(axis=dim, keepdims=True)
        np.subtract(grad, gx, out=gx)
        return gx
    gx = np.empty_like(rows)

    ones = np.ones(rows.shape[1], dtype=rows.dtype)

    def block(lo: int, hi: int) -> None:
        o, g = gx[lo:hi], grows[lo:hi]
        np.exp(rows[lo:hi], out=o)
        o *= (g @ ones)[:, None]
        np.subtract(g, o, out=o)

    _parallel_rows(rows.shape[0], rows.shape[1], block)
    return gx.reshape(out.shape)


# ---------------------------------------------------------------- cross-entropy and nll
def cross_entropy(
    logits: np.ndarray, target: np.ndarray, ignore_index: int, label_smoothing: float
) -> np.ndarray:
    """(R, 2): per-row loss of (R, C) logits against (R,) class indices (0 on ignored rows) and
    the row's logsumexp, which the backward reuses instead of a second max/sum pass."""
    r, c = logits.shape
    out = np.empty((r, 2), dtype=logits.dtype)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    eps = label_smoothing

    ones = np.ones(c, dtype=logits.dtype)

    def block(lo: int, hi: int) -> None:
        xb = logits[lo:hi]
        lse = _logsumexp_rows(xb, ones)
        picked = xb[np.arange(hi - lo), safe[lo:hi]]
        if eps:
            # smoothed target: (1 - eps) on the label, eps / C spread over every class
            lb = lse - (1 - eps) * picked - (eps / c) * (xb @ ones)
        else:
            lb = lse - picked
        out[lo:hi, 0] = np.where(valid[lo:hi], lb, 0)
        out[lo:hi, 1] = lse

    _parallel_rows(r, c, block)
    return out


def _logsumexp_rows(xb: np.ndarray, ones: np.ndarray) -> np.ndarray:
    """log(sum(exp(x))) of each row of a (B, C) block (see ``_exp_rows``)."""
    s, shift = _exp_rows(xb, np.empty_like(xb), ones)
    lse = np.log(s)
    lse += shift
    return lse


def cross_entropy_backward(
    grad: np.ndarray,
    logits: np.ndarray,
    target: np.ndarray,
    out: np.ndarray,
    ignore_index: int,
    label_smoothing: float,
) -> np.ndarray:
    """Gradient for the logits from the (R, 2) gradient of ``cross_entropy``'s output ``out``.

    d loss / dx = softmax - smoothed one-hot (0 on ignored rows); d lse / dx = softmax. The
    softmax is exp(x - lse) with the kept logsumexp, so no max or sum pass is needed.
    """
    r, c = logits.shape
    gx = np.empty_like(logits)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    g_loss = np.where(valid, grad[:, 0], 0).astype(logits.dtype, copy=False)
    g_soft = g_loss + grad[:, 1]
    lse = out[:, 1]
    eps = label_smoothing
    # g exp(x - lse) = exp(x - (lse - log g)) for g >= 0 (g = 0 gives exp(-inf) = 0): the shift
    # is formed in float64 and rounded once, and the multiply pass disappears. Rows whose shift
    # is large (where rounding it to float32 costs more than a few ulps) are redone exactly.
    with np.errstate(divide="ignore"):
        folded = bool((g_soft >= 0).all())
        if folded:
            shift = lse.astype(np.float64) - np.log(g_soft.astype(np.float64))
        else:
            shift = lse.astype(np.float64)
    exact = ~(np.abs(shift) <= _SHIFT_LIMIT) & (g_soft != 0)
    shift32 = np.where(exact, 0.0, shift).astype(logits.dtype)

    def block(lo: int, hi: int) -> None:
        o = gx[lo:hi]
        np.subtract(logits[lo:hi], shift32[lo:hi, None], out=o)
        with np.errstate(over="ignore"):
            np.exp(o, out=o)
        if not folded:
            o *= g_soft[lo:hi, None]
        redo = exact[lo:hi]
        if redo.any():
            # large logits: the max-shifted softmax, as in the forward's slow path
            rows = logits[lo:hi][redo]
            e = np.exp(rows - rows.max(axis=1, keepdims=True))
            e *= (g_soft[lo:hi][redo] / e.sum(axis=1))[:, None]
            o[redo] = e
        gb = g_loss[lo:hi]
        o[np.arange(hi - lo), safe[lo:hi]] -= (1 - eps) * gb
        if eps:
            o -= (eps / c * gb)[:, None]

    _parallel_rows(r, c, block)
    return gx


def cross_entropy_soft(logits: np.ndarray, probs: np.ndarray, label_smoothing: float) -> np.ndarray:
    """Per-row loss -sum_c t_c log_softmax(x)_c of (R, C) logits against (R, C) probabilities."""
    logp = log_softmax(logits, 1)
    t = _smooth(probs, label_smoothing)
    return np.asarray(-(t * logp).sum(axis=1))


def cross_entropy_soft_backward(
    grad: np.ndarray, logits: np.ndarray, probs: np.ndarray, label_smoothing: float
) -> tuple[np.ndarray, np.ndarray]:
    logp = log_softmax(logits, 1)
    t = _smooth(probs, label_smoothing)
    g = grad[:, None]
    # d/dx_j = sum(t) softmax_j - t_j;  d/dt_j = -(1 - eps) log_softmax_j
    gx = (np.exp(logp) * t.sum(axis=1, keepdims=True) - t) * g
    gt = logp * (-(1 - label_smoothing) * g)
    return gx, gt


def _smooth(probs: np.ndarray, eps: float) -> np.ndarray:
    if not eps:
        return probs
    return probs * (1 - eps) + eps / probs.shape[1]


def nll_loss(logp: np.ndarray, target: np.ndarray, ignore_index: int) -> np.ndarray:
    """Per-row -logp[i, target[i]] of (R, C) log-probabilities; ignored rows give 0."""
    valid = target != ignore_index
    picked = logp[np.arange(logp.shape[0]), np.where(valid, target, 0)]
    return np.where(valid, -picked, logp.dtype.type(0))


def nll_loss_backward(
    grad: np.ndarray, target: np.ndarray, num_classes: int, ignore_index: int
) -> np.ndarray:
    valid = target != ignore_index
    out = np.zeros((target.shape[0], num_classes), dtype=grad.dtype)
    out[np.arange(target.shape[0]), np.where(valid, target, 0)] = np.where(valid, -grad, 0)
    return out


def bce(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """-(t log p + (1 - t) log(1 - p)) with each log clamped at -100, as PyTorch does."""
    with np.errstate(divide="ignore"):
        lp = np.maximum(np.log(p), -100)
        l1p = np.maximum(np.log1p(-p), -100)
    return -(t * lp + (1 - t) * l1p)


def bce_backward(grad: np.ndarray, p: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # d/dp = (p - t) / (p (1 - p)), the denominator kept >= 1e-12;  d/dt = log(1 - p) - log(p)
    gp = grad * (p - t) / np.maximum(p * (1 - p), 1e-12)
    with np.errstate(divide="ignore"):
        gt = grad * (np.maximum(np.log1p(-p), -100) - np.maximum(np.log(p), -100))
    return gp.astype(p.dtype, copy=False), gt.astype(p.dtype, copy=False)


def bce_with_logits(x: np.ndarray, t: np.ndarray, pos_weight: np.ndarray) -> np.ndarray:
    """-(w t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))) with w = pos_weight, stably."""
    # log sigmoid(x) = -softplus(-x), log(1 - sigmoid(x)) = -softplus(x)
    return pos_weight * t * softplus(-x) + (1 - t) * softplus(x)


# ---------------------------------------------------------------- normalisation
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


def _norm_backward(
    grad: np.ndarray,
    xhat: np.ndarray,
    scale: np.ndarray,
    weight: np.ndarray,
    axes: tuple[int, ...],
    param_axes: tuple[int, ...],
    center: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of y = xhat * w + b, where xhat = (x - [mean]) * scale normalises over ``axes``.

    Returns (gx, gw, gb); gw and gb are summed over ``param_axes`` (keepdims for batch norm's
    channel layout is dropped by the caller).
    """
    gb = grad.sum(axis=param_axes) if param_axes else grad
    gw = (grad * xhat).sum(axis=param_axes) if param_axes else grad * xhat
    gxhat = grad * weight
    # d xhat: scale * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)); no mean term for RMS
    proj = (gxhat * xhat).mean(axis=axes, keepdims=True, dtype=grad.dtype)
    gx = gxhat - xhat * proj
    if center:
        gx -= gxhat.mean(axis=axes, keepdims=True, dtype=grad.dtype)
    gx *= scale
    return gx, gw, gb


def _lead_axes(ndim: int, count: int) -> tuple[int, ...]:
    return tuple(range(ndim - count))


def layer_norm_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, normalized_ndim: int, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    axes = _norm_axes(x.ndim, normalized_ndim)
    xhat, rstd = _standardize(x, axes, eps)
    lead = _lead_axes(x.ndim, normalized_ndim)
    return _norm_backward(grad, xhat, rstd, weight, axes, lead, center=True)


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
    gx, gw, _ = _norm_backward(grad, x * scale, scale, weight, axes, lead, center=False)
    return gx, gw


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
    return _norm_backward(grad, xhat, rstd, w, axes, axes, center=True)


# ---------------------------------------------------------------- attention
def _scores(
    q: np.ndarray, k: np.ndarray, bias: np.ndarray, scale: float, is_causal: bool
) -> np.ndarray:
    """softmax(q k^T * scale + bias [+ causal mask]) of shape (..., L, S)."""
    s = q @ np.swapaxes(k, -1, -2)
    s *= s.dtype.type(scale)
    if bias.ndim:
        s = s + bias
    if is_causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, s.dtype.type(-np.inf))
    return softmax(np.ascontiguousarray(s), s.ndim - 1)


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    keep: np.ndarray,
    scale: float,
    is_causal: bool,
) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # a fully masked row gives NaN, as in PyTorch's math path
        p = _scores(q, k, bias, scale, is_causal)
    if keep.ndim:
        p = p * keep
    return np.asarray(p @ v).astype(q.dtype, copy=False)


def attention_backward(
    grad: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    keep: np.ndarray,
    scale: float,
    is_causal: bool,
) -> tuple[np.ndarray, ...]:
    """Gradients for q, k, v, the additive bias (..., L, S) and the keep mask (..., L, S)."""
    with np.errstate(invalid="ignore"):
        p = _scores(q, k, bias, scale, is_causal)
    pk = p * keep if keep.ndim else p
    gv = np.swapaxes(pk, -1, -2) @ grad
    gpk = grad @ np.swapaxes(v, -1, -2)
    gkeep = gpk * p if keep.ndim else np.zeros_like(keep)
    gp = gpk * keep if keep.ndim else gpk
    # softmax backward: ds = p * (gp - sum(gp * p))
    gs = p * (gp - (gp * p).sum(axis=-1, keepdims=True))
    gbias = gs if bias.ndim else np.zeros_like(bias)
    gs = gs * gs.dtype.type(scale)
    gq = gs @ k
    gk = np.swapaxes(gs, -1, -2) @ q
    grads = (gq, gk, gv, gbias, gkeep)
    return tuple(g.astype(q.dtype, copy=False) for g in grads)


# ---------------------------------------------------------------- convolution: im2col
def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _pad(x: np.ndarray, padding: Pair, value: float = 0.0) -> np.ndarray:
    ph, pw = padding
    if not ph and not pw:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _tap(i: int, j: int, stride: Pair, dilation: Pair, out: Pair) -> tuple[slice, slice]:
    """The (rows, cols) slices of the padded input that kernel tap (i, j) reads."""
    r0, c0 = i * dilation[0], j * dilation[1]
    return (
        slice(r0, r0 + stride[0] * (out[0] - 1) + 1, stride[0]),
        slice(c0, c0 + stride[1] * (out[1] - 1) + 1, stride[1]),
    )


class _Geometry:
    """Where each output position's column lives, for one convolution.

    With stride 1 and a kernel narrow next to the image, the columns use the padded input's full
    width (``width = Wp``): output position (ho, wo) is column ho * Wp + wo, so kernel tap (i, j)
    reads one contiguous run of Ho * Wp values per (channel, image) at offset i*dh*Wp + j*dw of
    the flattened image. The wo >= Wo columns are junk, computed and dropped (zero in
    gradients). Otherwise the columns are exact (Ho, Wo) positions filled with strided slices
    (``width = Wo``).
    """

    __slots__ = ("dilation", "flat", "kernel", "out", "padding", "shape", "stride", "width")

    def __init__(
        self, shape: tuple[int, ...], kernel: Pair, stride: Pair, padding: Pair, dilation: Pair
    ) -> None:
        self.shape = shape  # the input's (N, C, H, W)
        self.kernel, self.stride, self.padding, self.dilation = kernel, stride, padding, dilation
        h, w = shape[2], shape[3]
        self.out = (
            _conv_out(h, kernel[0], stride[0], padding[0], dilation[0]),
            _conv_out(w, kernel[1], stride[1], padding[1], dilation[1]),
        )
        # junk columns cost matrix-product work; the contiguous copies win (measured on LeNet's
        # 14 -> 10 layer) while they at most double the columns
        wp = w + 2 * padding[1]
        self.flat = stride == (1, 1) and wp <= 2 * self.out[1]
        self.width = wp if self.flat else self.out[1]

    @property
    def columns(self) -> int:  # columns per image
        return self.out[0] * self.width

    def taps(self) -> list[tuple[int, int, Any]]:
        """(i, j, where) per tap: a flat offset, or (rows, cols) slices of the padded input."""
        kh, kw = self.kernel
        dh, dw = self.dilation
        if self.flat:
            return [(i, j, i * dh * self.width + j * dw) for i in range(kh) for j in range(kw)]
        return [
            (i, j, _tap(i, j, self.stride, self.dilation, self.out))
            for i in range(kh)
            for j in range(kw)
        ]

    def flat_zeros(self, dtype: np.dtype) -> np.ndarray:
        """Zeros (C, N, Hp*Wp + tail): channels-first flattened padded images, with a zero tail
        that the last taps' junk columns may reach."""
        n, c, h, w = self.shape
        hp, wp = h + 2 * self.padding[0], w + 2 * self.padding[1]
        tail = (self.kernel[1] - 1) * self.dilation[1]
        return np.zeros((c, n, hp * wp + tail), dtype=dtype)

    def padded_flat(self, x: np.ndarray) -> np.ndarray:
        """x (N, C, H, W) written into ``flat_zeros``."""
        n, c, h, w = self.shape
        ph, pw = self.padding
        buf = self.flat_zeros(x.dtype)
        view = buf[:, :, : (h + 2 * ph) * (w + 2 * pw)].reshape(c, n, h + 2 * ph, w + 2 * pw)
        view[:, :, ph : ph + h, pw : pw + w] = x.transpose(1, 0, 2, 3)
        return buf

    def im2col(self, x: np.ndarray, groups: int) -> np.ndarray:
        """Columns (G, Cg*kh*kw, N*columns) of x (N, C, H, W)."""
        n, c = self.shape[:2]
        kh, kw = self.kernel
        taps = self.taps()
        if self.flat:
            src = self.padded_flat(x)
            cols = np.empty((c, kh, kw, n, self.columns), dtype=x.dtype)
            length = self.columns

            def fill(lo: int, hi: int) -> None:
                for i, j, off in taps:
                    cols[:, i, j, lo:hi] = src[:, lo:hi, off : off + length]

        else:
            # channels first, so that each tap fills a (C, N, Ho, Wo) slab
            xt = _pad(x, self.padding).transpose(1, 0, 2, 3)
            cols = np.empty((c, kh, kw, n, self.out[0], self.out[1]), dtype=x.dtype)

            def fill(lo: int, hi: int) -> None:
                for i, j, (rs, cs) in taps:
                    cols[:, i, j, lo:hi] = xt[:, lo:hi, rs, cs]

        # the images are split between threads; each copies every tap of its share
        _parallel_split(n, cols.size, fill)
        return cols.reshape(groups, (c // groups) * kh * kw, n * self.columns)

    def col2im(self, dcols: np.ndarray) -> np.ndarray:
        """Adjoint of ``im2col``: sum (G, Cg*kh*kw, N*columns) columns into (N, C, H, W)."""
        n, c, h, w = self.shape
        kh, kw = self.kernel
        ph, pw = self.padding
        hp, wp = h + 2 * ph, w + 2 * pw
        taps = self.taps()
        if self.flat:
            d = dcols.reshape(c, kh, kw, n, self.columns)
            acc = self.flat_zeros(dcols.dtype)
            length = self.columns

            def add(lo: int, hi: int) -> None:
                for i, j, off in taps:
                    acc[:, lo:hi, off : off + length] += d[:, i, j, lo:hi]

            _parallel_split(n, d.size, add)
            full = acc[:, :, : hp * wp].reshape(c, n, hp, wp)
        else:
            d = dcols.reshape(c, kh, kw, n, self.out[0], self.out[1])
            full = np.zeros((c, n, hp, wp), dtype=dcols.dtype)

            def add_taps(lo: int, hi: int) -> None:
                for i, j, (rs, cs) in taps:
                    full[:, lo:hi, rs, cs] += d[:, i, j, lo:hi]

            _parallel_split(n, d.size, add_taps)
        # (C, N, Hp, Wp) -> (N, C, H, W)
        return np.ascontiguousarray(full[:, :, ph : ph + h, pw : pw + w].transpose(1, 0, 2, 3))

    def rows(self, y: np.ndarray, groups: int) -> np.ndarray:
        """(N, O, Ho, Wo) -> (G, O/G, N*columns), channels as matrix rows; junk columns zero."""
        n, o = y.shape[:2]
        yt = y.transpose(1, 0, 2, 3)
        if self.width == self.out[1]:
            m = np.ascontiguousarray(yt)
        else:
            m = np.zeros((o, n, self.out[0], self.width), dtype=y.dtype)
            m[..., : self.out[1]] = yt
        return m.reshape(groups, o // groups, -1)

    def unrows(self, m: np.ndarray) -> np.ndarray:
        """(G, O/G, N*columns) -> (N, O, Ho, Wo), contiguous, junk columns dropped."""
        o = m.shape[0] * m.shape[1]
        t = m.reshape(o, self.shape[0], self.out[0], self.width)[..., : self.out[1]]
        return np.ascontiguousarray(t.transpose(1, 0, 2, 3))


def _matmul_nt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b^T for stacks a (G, M, L), b (G, N, L) with a long shared axis L.

    Computed as (b @ a^T)^T, the larger operand first, and for very long L summed over chunks
    of 4096: OpenBLAS is several times slower on these (small M, N; large L) shapes otherwise
    (measured on LeNet's weight gradients). The pool's threads each take an equal share of L
    and keep a partial sum.
    """
    length = a.shape[-1]
    step = 4096 if length > 16384 else max(length, 1)
    partial: dict[int, np.ndarray] = {}

    def run(lo: int, hi: int) -> None:
        acc = None
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            p = b[..., s:e] @ a[..., s:e].transpose(0, 2, 1)
            acc = p if acc is None else np.add(acc, p, out=acc)
        if acc is not None:
            partial[lo] = acc

    _parallel_split(length, (a.shape[1] + b.shape[1]) * a.shape[0] * length, run)
    if not partial:
        return np.zeros((a.shape[0], a.shape[1], b.shape[1]), dtype=np.result_type(a, b))
    parts = list(partial.values())
    out = parts[0]
    for p in parts[1:]:
        out += p
    return np.ascontiguousarray(out.transpose(0, 2, 1))


def _matmul_wide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (G, M, K) @ b (G, K, L) for a wide L, its columns split between the pool's threads.

    With a short K (a first layer's few taps) each thread works through 4096-column chunks,
    which keeps the operand in cache: twice as fast as one product on LeNet's first layer.
    """
    length = b.shape[-1]
    out = np.empty((a.shape[0], a.shape[1], length), dtype=np.result_type(a, b))
    step = 4096 if a.shape[2] <= 64 else max(length, 1)

    def run(lo: int, hi: int) -> None:
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            np.matmul(a, b[..., s:e], out=out[..., s:e])

    _parallel_split(length, out.size * a.shape[2] // 8, run)
    return out


def _weight_rows(weight: np.ndarray, groups: int) -> np.ndarray:
    """(O, Cg, kh, kw) -> (G, O/G, Cg*kh*kw)."""
    return weight.reshape(groups, weight.shape[0] // groups, -1)


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> np.ndarray:
    geo = _Geometry(x.shape, (weight.shape[2], weight.shape[3]), stride, padding, dilation)
    y = geo.unrows(_matmul_wide(_weight_rows(weight, groups), geo.im2col(x, groups)))
    y += bias.reshape(1, -1, 1, 1)
    return y


def conv2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """Gradients of ``conv2d`` for x, weight and bias (x and weight only when asked for)."""
    geo = _Geometry(x.shape, (weight.shape[2], weight.shape[3]), stride, padding, dilation)
    g = geo.rows(grad, groups)  # (G, Og, N*columns)

    def weight_grad() -> np.ndarray:
        # dW = g @ cols^T; the columns are rebuilt from x rather than kept from the forward
        return _matmul_nt(g, geo.im2col(x, groups)).reshape(weight.shape)

    def input_grad() -> np.ndarray:
        return geo.col2im(_matmul_wide(_weight_rows(weight, groups).transpose(0, 2, 1), g))

    gx = gw = None
    if need_weight and need_input and num_threads() > 1 and g.size * 8 >= _PARALLEL_MIN:
        # the two gradients are independent: one pool thread each, instead of splitting both
        gw_future = _get_pool().submit(_unsplit, weight_grad)
        gx = _unsplit(input_grad)
        gw = gw_future.result()
    else:
        gw = weight_grad() if need_weight else None
        gx = input_grad() if need_input else None
    return gx, gw, g.sum(axis=2).reshape(-1)


def _unsplit(fn: Callable[[], np.ndarray]) -> np.ndarray:
    """Run ``fn`` on this thread with ``_parallel_split`` serial inside it."""
    _serial.on = True
    try:
        return fn()
    finally:
        _serial.on = False


def conv_transpose2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    groups: int,
    dilation: Pair,
) -> np.ndarray:
    """The adjoint of conv2d: ``weight`` is (C_in, C_out / groups, kh, kw)."""
    n, _, h, w = x.shape
    _, og, kh, kw = weight.shape
    out_shape = (
        n,
        og * groups,
        (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1,
        (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1,
    )
    # a conv2d from the output back to x has weight (C_in, C_out/G, kh, kw) = (O, Cg, kh, kw):
    # this op is that conv's input gradient
    geo = _Geometry(out_shape, (kh, kw), stride, padding, dilation)
    y = geo.col2im(
        _matmul_wide(_weight_rows(weight, groups).transpose(0, 2, 1), geo.rows(x, groups))
    )
    y += bias.reshape(1, -1, 1, 1)
    return y


def conv_transpose2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    geo = _Geometry(grad.shape, (weight.shape[2], weight.shape[3]), stride, padding, dilation)
    gx = gw = None
    if need_input or need_weight:
        cols = geo.im2col(grad, groups)
        if need_input:
            gx = geo.unrows(_matmul_wide(_weight_rows(weight, groups), cols))
        if need_weight:
            gw = _matmul_nt(geo.rows(x, groups), cols).reshape(weight.shape)
    return gx, gw, grad.sum(axis=(0, 2, 3))


# ---------------------------------------------------------------- pooling
def _pool_geometry(
    x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair
) -> Pair:
    h, w = x.shape[2:]
    return (
        _conv_out(h, kernel[0], stride[0], padding[0], dilation[0]),
        _conv_out(w, kernel[1], stride[1], padding[1], dilation[1]),
    )


def _taps(kernel: Pair, stride: Pair, dilation: Pair, out: Pair) -> list[tuple[int, Any]]:
    """(tap number, slice key) of each kernel tap: the (N, C, Ho, Wo) inputs that tap reads."""
    taps = []
    for i in range(kernel[0]):
        r0 = i * dilation[0]
        rs = slice(r0, r0 + stride[0] * (out[0] - 1) + 1, stride[0])
        for j in range(kernel[1]):
            c0 = j * dilation[1]
            cs = slice(c0, c0 + stride[1] * (out[1] - 1) + 1, stride[1])
            taps.append((i * kernel[1] + j, (slice(None), slice(None), rs, cs)))
    return taps


def max_pool2d(
    x: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair
) -> np.ndarray:
    out = _pool_geometry(x, kernel_size, stride, padding, dilation)
    xp = _pad(x, padding, -np.inf)
    taps = _taps(kernel_size, stride, dilation, out)
    y = np.empty((*x.shape[:2], *out), dtype=x.dtype)

    def run(lo: int, hi: int) -> None:
        yb = y[lo:hi]
        np.copyto(yb, xp[lo:hi][taps[0][1]])
        for _, key in taps[1:]:
            np.maximum(yb, xp[lo:hi][key], out=yb)

    _parallel_split(x.shape[0], y.size * len(taps), run)
    return y


def max_pool2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> np.ndarray:
    """Each output's gradient goes to the first maximum of its window (row-major tap order)."""
    out = grad.shape[2:]
    xp = _pad(x, padding, -np.inf)
    taps = _taps(kernel_size, stride, dilation, out)
    # disjoint windows: each input is read by at most one tap of one window, so assign; when
    # they also tile the padded input exactly, every element is written and zeros are not needed
    spans = [dilation[i] * (kernel_size[i] - 1) + 1 for i in range(2)]
    disjoint = all(stride[i] >= spans[i] for i in range(2))
    tiled = disjoint and all(
        stride[i] == spans[i] == kernel_size[i] and out[i] * stride[i] == xp.shape[2 + i]
        for i in range(2)
    )
    gxp = np.empty(xp.shape, dtype=grad.dtype) if tiled else np.zeros(xp.shape, dtype=grad.dtype)

    def run(lo: int, hi: int) -> None:
        xb, gb, gxb = xp[lo:hi], grad[lo:hi], gxp[lo:hi]
        vals = [xb[key] for _, key in taps]
        best = np.array(vals[0], copy=True)
        for v in vals[1:]:
            np.maximum(best, v, out=best)
        has_nan = bool(np.isnan(best).any())
        # the first tap equal to the window's maximum takes the gradient: ``taken`` marks the
        # windows already served (NaN counts as the maximum of a window that holds one)
        taken = None
        for i, (_, key) in enumerate(taps):
            first = np.equal(vals[i], best)
            if has_nan:
                first |= np.isnan(vals[i])
            if taken is not None:
                np.greater(first, taken, out=first)  # first and not taken
            if disjoint:
                np.multiply(gb, first, out=gxb[key])
            else:
                gxb[key] += np.multiply(gb, first)
            if i < len(taps) - 1:
                taken = first if taken is None else np.logical_or(taken, first, out=taken)

    _parallel_split(x.shape[0], grad.size * len(taps), run)
    ph, pw = padding
    return gxp[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


def avg_pool2d(x: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    """Mean over each window; zero padding counts in the divisor (count_include_pad=True)."""
    out = _pool_geometry(x, kernel_size, stride, padding, (1, 1))
    xp = _pad(x, padding)
    taps = _taps(kernel_size, stride, (1, 1), out)
    y = np.array(xp[taps[0][1]], copy=True)
    for _, key in taps[1:]:
        y += xp[key]
    y *= y.dtype.type(1.0 / (kernel_size[0] * kernel_size[1]))
    return y


def avg_pool2d_backward(
    grad: np.ndarray,
    input_shape: tuple[int, ...],
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
) -> np.ndarray:
    n, c, h, w = input_shape
    ph, pw = padding
    gxp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=grad.dtype)
    share = grad * grad.dtype.type(1.0 / (kernel_size[0] * kernel_size[1]))
    for _, key in _taps(kernel_size, stride, (1, 1), grad.shape[2:]):
        gxp[key] += share
    return gxp[:, :, ph : ph + h, pw : pw + w]


def _adaptive_matrix(size: int, out: int, dtype: np.dtype) -> np.ndarray:
    """(out, size) averaging matrix: row i averages [floor(i*size/out), ceil((i+1)*size/out))."""
    m = np.zeros((out, size), dtype=dtype)
    for i in range(out):
        lo = (i * size) // out
        hi = -(-((i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def adaptive_avg_pool2d(x: np.ndarray, output_size: Pair) -> np.ndarray:
    ah = _adaptive_matrix(x.shape[2], output_size[0], x.dtype)
    aw = _adaptive_matrix(x.shape[3], output_size[1], x.dtype)
    # (N, C, H, W) -> (N, C, Ho, Wo): the bins of H and W are independent
    return np.ascontiguousarray((ah @ x @ aw.T).astype(x.dtype, copy=False))


def adaptive_avg_pool2d_backward(grad: np.ndarray, input_shape: tuple[int, ...]) -> np.ndarray:
    ah = _adaptive_matrix(input_shape[2], grad.shape[2], grad.dtype)
    aw = _adaptive_matrix(input_shape[3], grad.shape[3], grad.dtype)
    return np.ascontiguousarray((ah.T @ grad @ aw).astype(grad.dtype, copy=False))


# ---------------------------------------------------------------- embedding
def embedding_backward(grad: np.ndarray, indices: np.ndarray, num_embeddings: int) -> np.ndarray:
    """Sum the rows of ``grad`` (..., D) into a (num_embeddings, D) table at ``indices``."""
    d = grad.shape[-1]
    out = np.zeros((num_embeddings, d), dtype=grad.dtype)
    np.add.at(out, indices.reshape(-1), grad.reshape(-1, d))
    return out
