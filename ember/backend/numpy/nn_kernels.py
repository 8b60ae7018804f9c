"""NumPy kernels of the neural-network rows (activations, fused softmax/norm/loss, conv, pooling).

The ``NumpyBackend`` methods in its "nn kernels" section call these functions. Convolutions use an
im2col layout built with ``as_strided`` views and one matrix product per group; their input
gradients scatter the column gradients back with one strided add per kernel tap (col2im). Row-wise
kernels over large arrays (softmax, log-softmax, cross-entropy) process cache-sized row blocks on
a small thread pool (NumPy releases the GIL inside ufuncs); ``EMBER_NUM_THREADS`` sets its size.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .special import erf as _erf

Pair = tuple[int, int]
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = 0.044715
_BLOCK_ELEMS = 1 << 16  # elements per row block: a few hundred KiB, inside L2
_PARALLEL_MIN = 1 << 16  # below this many elements one thread is faster
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def num_threads() -> int:
    """Threads for the row-blocked kernels: ``EMBER_NUM_THREADS``, else the CPU count (max 8)."""
    env = os.environ.get("EMBER_NUM_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(os.cpu_count() or 1, 8))


def _parallel_rows(rows: int, cols: int, fn: Callable[[int, int], None]) -> None:
    """Call ``fn(lo, hi)`` over cache-sized row blocks of ``range(rows)`` on a thread pool."""
    global _pool, _pool_size
    block = max(1, _BLOCK_ELEMS // max(cols, 1))
    n = num_threads()
    if n == 1 or rows * cols < _PARALLEL_MIN or rows < 2:
        for lo in range(0, rows, block):
            fn(lo, min(lo + block, rows))
        return
    if _pool is None or _pool_size != n:
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ember-np")
        _pool_size = n
    per = -(-rows // n)

    def work(start: int) -> None:
        stop = min(start + per, rows)
        for lo in range(start, stop, block):
            fn(lo, min(lo + block, stop))

    futures = [_pool.submit(work, s) for s in range(per, rows, per)]
    work(0)  # the calling thread takes the first share
    for f in futures:
        f.result()


def _as_rows(x: np.ndarray, dim: int) -> np.ndarray | None:
    """``x`` as a C-contiguous (R, C) view when ``dim`` is its last axis, else ``None``."""
    if dim != x.ndim - 1 or not x.flags.c_contiguous or x.ndim == 0:
        return None
    return x.reshape(-1, x.shape[-1])


# ---------------------------------------------------------------- activations
def relu_backward(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.where(out > 0, grad, grad.dtype.type(0))


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
    if approximate == "tanh":
        inner = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x))
        return 0.5 * x * (1 + inner)
    return 0.5 * x * (1 + _erf(x * x.dtype.type(_SQRT_HALF)))


def gelu_backward(grad: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x2 * x))
        # d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3c x^2)
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_C * x2)
        return grad * d
    # d/dx x Phi(x) = Phi(x) + x phi(x)
    cdf = 0.5 * (1 + _erf(x * x.dtype.type(_SQRT_HALF)))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return grad * (cdf + x * pdf)


def silu_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = sigmoid(x)
    # d/dx x s(x) = s (1 + x (1 - s))
    return grad * (s * (1 + x * (1 - s)))


# ---------------------------------------------------------------- softmax family
def softmax(x: np.ndarray, dim: int) -> np.ndarray:
    rows = _as_rows(x, dim)
    if rows is None:
        # shift by the max so exp cannot overflow
        out = np.subtract(x, x.max(axis=dim, keepdims=True))
        np.exp(out, out=out)
        out /= out.sum(axis=dim, keepdims=True)
        return out
    out = np.empty_like(rows)

    def block(lo: int, hi: int) -> None:
        o = out[lo:hi]
        np.subtract(rows[lo:hi], rows[lo:hi].max(axis=1, keepdims=True), out=o)
        np.exp(o, out=o)
        o /= o.sum(axis=1, keepdims=True)

    _parallel_rows(rows.shape[0], rows.shape[1], block)
    return out.reshape(x.shape)


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    rows = _as_rows(x, dim)
    if rows is None:
        shifted = np.subtract(x, x.max(axis=dim, keepdims=True))
        lse = np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        shifted -= lse
        return shifted
    out = np.empty_like(rows)

    def block(lo: int, hi: int) -> None:
        o = out[lo:hi]
        np.subtract(rows[lo:hi], rows[lo:hi].max(axis=1, keepdims=True), out=o)
        s = np.exp(o).sum(axis=1, keepdims=True)
        o -= np.log(s, out=s)

    _parallel_rows(rows.shape[0], rows.shape[1], block)
    return out.reshape(x.shape)


def softmax_backward(grad: np.ndarray, out: np.ndarray, dim: int) -> np.ndarray:
    # d softmax: y * (g - sum(g * y))
    gx = grad * out
    gx -= out * gx.sum(axis=dim, keepdims=True)
    return gx


def log_softmax_backward(grad: np.ndarray, out: np.ndarray, dim: int) -> np.ndarray:
    # d log_softmax: g - exp(y) * sum(g)
    gx = np.exp(out)
    gx *= grad.sum(axis=dim, keepdims=True)
    np.subtract(grad, gx, out=gx)
    return gx


# ---------------------------------------------------------------- cross-entropy and nll
def cross_entropy(
    logits: np.ndarray, target: np.ndarray, ignore_index: int, label_smoothing: float
) -> np.ndarray:
    """Per-row loss of (R, C) logits against (R,) class indices; ignored rows give 0."""
    r, c = logits.shape
    loss = np.empty(r, dtype=logits.dtype)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    eps = label_smoothing

    def block(lo: int, hi: int) -> None:
        xb = logits[lo:hi]
        m = xb.max(axis=1)
        t = np.subtract(xb, m[:, None])
        np.exp(t, out=t)
        lse = np.log(t.sum(axis=1)) + m
        picked = xb[np.arange(hi - lo), safe[lo:hi]]
        if eps:
            # smoothed target: (1 - eps) on the label, eps / C spread over every class
            lb = lse - (1 - eps) * picked - eps * xb.mean(axis=1)
        else:
            lb = lse - picked
        loss[lo:hi] = np.where(valid[lo:hi], lb, 0)

    _parallel_rows(r, c, block)
    return loss


def cross_entropy_backward(
    grad: np.ndarray,
    logits: np.ndarray,
    target: np.ndarray,
    ignore_index: int,
    label_smoothing: float,
) -> np.ndarray:
    """Gradient of ``cross_entropy`` w.r.t. the logits: g * (softmax - smoothed one-hot)."""
    r, c = logits.shape
    gx = np.empty_like(logits)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    g = np.where(valid, grad, 0).astype(logits.dtype, copy=False)
    eps = label_smoothing

    def block(lo: int, hi: int) -> None:
        xb = logits[lo:hi]
        o = gx[lo:hi]
        np.subtract(xb, xb.max(axis=1, keepdims=True), out=o)
        np.exp(o, out=o)
        gb = g[lo:hi]
        o *= (gb / o.sum(axis=1))[:, None]
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
    return np.asarray(p @ v)


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
    return gq, gk, gv, gbias, gkeep


# ---------------------------------------------------------------- convolution: im2col
def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _pad(x: np.ndarray, padding: Pair, value: float = 0.0) -> np.ndarray:
    ph, pw = padding
    if not ph and not pw:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _windows(xp: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair, out: Pair) -> np.ndarray:
    """A (N, C, Ho, Wo, kh, kw) view of the padded input's sliding windows (no copy)."""
    n, c = xp.shape[:2]
    s0, s1, s2, s3 = xp.strides
    shape = (n, c, out[0], out[1], kernel[0], kernel[1])
    strides = (s0, s1, s2 * stride[0], s3 * stride[1], s2 * dilation[0], s3 * dilation[1])
    return as_strided(xp, shape, strides, writeable=False)


def _cols(
    x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, groups: int
) -> tuple[np.ndarray, Pair]:
    """im2col: (G, N*Ho*Wo, Cg*kh*kw) columns of ``x`` (a contiguous copy), and (Ho, Wo)."""
    n, c, h, w = x.shape
    out = (
        _conv_out(h, kernel[0], stride[0], padding[0], dilation[0]),
        _conv_out(w, kernel[1], stride[1], padding[1], dilation[1]),
    )
    win = _windows(_pad(x, padding), kernel, stride, dilation, out)
    cg = c // groups
    # (N, G, Cg, Ho, Wo, kh, kw) -> (G, N, Ho, Wo, Cg, kh, kw)
    win = win.reshape(n, groups, cg, out[0], out[1], kernel[0], kernel[1])
    cols = np.ascontiguousarray(win.transpose(1, 0, 3, 4, 2, 5, 6))
    return cols.reshape(groups, n * out[0] * out[1], cg * kernel[0] * kernel[1]), out


def _col2im(
    dcols: np.ndarray,
    x_shape: tuple[int, ...],
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    out: Pair,
    groups: int,
) -> np.ndarray:
    """Adjoint of ``_cols``: sum (G, N*Ho*Wo, Cg*kh*kw) column values back into the input."""
    n, c, h, w = x_shape
    kh, kw = kernel
    ho, wo = out
    ph, pw = padding
    cg = c // groups
    # (G, N, Ho, Wo, Cg, kh, kw) -> (N, G, Cg, kh, kw, Ho, Wo)
    d = dcols.reshape(groups, n, ho, wo, cg, kh, kw).transpose(1, 0, 4, 5, 6, 2, 3)
    d = d.reshape(n, c, kh, kw, ho, wo)
    gxp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=dcols.dtype)
    sh, sw = stride
    for i in range(kh):
        r0 = i * dilation[0]
        for j in range(kw):
            c0 = j * dilation[1]
            gxp[:, :, r0 : r0 + sh * (ho - 1) + 1 : sh, c0 : c0 + sw * (wo - 1) + 1 : sw] += d[
                :, :, i, j
            ]
    if ph or pw:
        gxp = gxp[:, :, ph : ph + h, pw : pw + w]
    return gxp


def _group_rows(y: np.ndarray, groups: int) -> np.ndarray:
    """(N, O, Ho, Wo) -> (G, N*Ho*Wo, Og): output channels per group as matrix columns."""
    n, o, ho, wo = y.shape
    t = y.reshape(n, groups, o // groups, ho, wo).transpose(1, 0, 3, 4, 2)
    return t.reshape(groups, n * ho * wo, o // groups)


def _ungroup_rows(m: np.ndarray, n: int, out: Pair) -> np.ndarray:
    """(G, N*Ho*Wo, Og) -> (N, G*Og, Ho, Wo), contiguous."""
    g, _, og = m.shape
    t = m.reshape(g, n, out[0], out[1], og).transpose(1, 0, 4, 2, 3)
    return np.ascontiguousarray(t).reshape(n, g * og, out[0], out[1])


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> np.ndarray:
    o, cg, kh, kw = weight.shape
    cols, out = _cols(x, (kh, kw), stride, padding, dilation, groups)
    wm = weight.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
    y = _ungroup_rows(cols @ wm, x.shape[0], out)
    y += bias.reshape(1, o, 1, 1)
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
    o, cg, kh, kw = weight.shape
    out = grad.shape[2:]
    g = _group_rows(grad, groups)  # (G, N*Ho*Wo, Og)
    gx = gw = None
    if need_weight:
        cols, _ = _cols(x, (kh, kw), stride, padding, dilation, groups)
        gw = (np.swapaxes(g, 1, 2) @ cols).reshape(o, cg, kh, kw)
    if need_input:
        wm = weight.reshape(groups, o // groups, cg * kh * kw)
        gx = _col2im(g @ wm, x.shape, (kh, kw), stride, padding, dilation, out, groups)
    return gx, gw, grad.sum(axis=(0, 2, 3))


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
    n, c, h, w = x.shape
    _, og, kh, kw = weight.shape
    out_shape = (
        n,
        og * groups,
        (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1,
        (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1,
    )
    # as a conv2d from the output to x, the weight is (C_in, C_out/G, kh, kw) = (O, Cg, kh, kw)
    wm = weight.reshape(groups, c // groups, og * kh * kw)
    y = _col2im(
        _group_rows(x, groups) @ wm, out_shape, (kh, kw), stride, padding, dilation, (h, w), groups
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
    c, og, kh, kw = weight.shape
    gx = gw = None
    if need_input or need_weight:
        cols, out = _cols(grad, (kh, kw), stride, padding, dilation, groups)
        if need_input:
            wm = weight.reshape(groups, c // groups, og * kh * kw).transpose(0, 2, 1)
            gx = _ungroup_rows(cols @ wm, x.shape[0], out)
        if need_weight:
            gw = (np.swapaxes(_group_rows(x, groups), 1, 2) @ cols).reshape(c, og, kh, kw)
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


def _taps(
    xp: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair, out: Pair
) -> list[tuple[int, Any]]:
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
    taps = _taps(xp, kernel_size, stride, dilation, out)
    y = np.array(xp[taps[0][1]], copy=True)
    for _, key in taps[1:]:
        np.maximum(y, xp[key], out=y)
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
    taps = _taps(xp, kernel_size, stride, dilation, out)
    best = np.array(xp[taps[0][1]], copy=True)
    arg = np.zeros(best.shape, dtype=np.int32)
    for t, key in taps[1:]:
        v = xp[key]
        better = v > best
        np.copyto(best, v, where=better)
        arg[better] = t
    gxp = np.zeros(xp.shape, dtype=grad.dtype)
    zero = grad.dtype.type(0)
    for t, key in taps:
        gxp[key] += np.where(arg == t, grad, zero)
    ph, pw = padding
    return gxp[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


def avg_pool2d(x: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    """Mean over each window; zero padding counts in the divisor (count_include_pad=True)."""
    out = _pool_geometry(x, kernel_size, stride, padding, (1, 1))
    xp = _pad(x, padding)
    taps = _taps(xp, kernel_size, stride, (1, 1), out)
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
    for _, key in _taps(gxp, kernel_size, stride, (1, 1), grad.shape[2:]):
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
    return np.ascontiguousarray(ah @ x @ aw.T)


def adaptive_avg_pool2d_backward(grad: np.ndarray, input_shape: tuple[int, ...]) -> np.ndarray:
    ah = _adaptive_matrix(input_shape[2], grad.shape[2], grad.dtype)
    aw = _adaptive_matrix(input_shape[3], grad.shape[3], grad.dtype)
    return np.ascontiguousarray(ah.T @ grad @ aw)


# ---------------------------------------------------------------- embedding
def embedding_backward(grad: np.ndarray, indices: np.ndarray, num_embeddings: int) -> np.ndarray:
    """Sum the rows of ``grad`` (..., D) into a (num_embeddings, D) table at ``indices``."""
    d = grad.shape[-1]
    out = np.zeros((num_embeddings, d), dtype=grad.dtype)
    np.add.at(out, indices.reshape(-1), grad.reshape(-1, d))
    return out
