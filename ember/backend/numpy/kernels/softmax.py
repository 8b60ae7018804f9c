"""NumPy kernels of the fused softmax family: softmax, log-softmax, cross-entropy and nll.

Large inputs are processed in cache-sized row blocks on the kernel pool (see ``pool.py``).
"""

from __future__ import annotations

import numpy as np

from .threads import _as_rows, _parallel_rows

_SHIFT_LIMIT = 32.0  # |shift| up to here rounds to float32 within 2e-6
_F32 = np.dtype(np.float32)


def _acc(dtype: np.dtype) -> np.dtype:
    """float32 for float16/bfloat16 logits (their rows compute and return in it), else ``dtype``."""
    return _F32 if dtype.itemsize < 4 else dtype


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


def cross_entropy(
    logits: np.ndarray, target: np.ndarray, ignore_index: int, label_smoothing: float
) -> tuple[np.ndarray, np.ndarray]:
    """(loss, lse): the (R,) per-row loss of (R, C) logits against (R,) class indices (0 on
    ignored rows), and the residual the backward reuses instead of a second max/sum pass: each
    row's logsumexp.

    float16/bfloat16 logits give a float32 result: each row block is upcast as it is read.
    """
    r, c = logits.shape
    acc = _acc(logits.dtype)
    half = acc != logits.dtype
    loss = np.empty(r, dtype=acc)
    lses = np.empty(r, dtype=acc)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    eps = label_smoothing

    ones = np.ones(c, dtype=acc)

    def block(lo: int, hi: int) -> None:
        xb = logits[lo:hi].astype(acc) if half else logits[lo:hi]
        lse = _logsumexp_rows(xb, ones)
        picked = xb[np.arange(hi - lo), safe[lo:hi]]
        if eps:
            # smoothed target: (1 - eps) on the label, eps / C spread over every class
            lb = lse - (1 - eps) * picked - (eps / c) * (xb @ ones)
        else:
            lb = lse - picked
        loss[lo:hi] = np.where(valid[lo:hi], lb, 0)
        lses[lo:hi] = lse

    _parallel_rows(r, c, block)
    return loss, lses


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
    lse: np.ndarray,
    ignore_index: int,
    label_smoothing: float,
) -> np.ndarray:
    """Gradient for the logits from the (R,) gradient of ``cross_entropy``'s per-row loss.

    d loss / dx = softmax - smoothed one-hot (0 on ignored rows). The softmax is exp(x - lse)
    with the forward's residual logsumexp ``lse``, so no max or sum pass is needed.
    float16/bfloat16 logits: each block is computed in float32 and cast to the logits' dtype.
    """
    r, c = logits.shape
    acc = _acc(logits.dtype)
    half = acc != logits.dtype
    gx = np.empty_like(logits)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    g_loss = np.where(valid, grad, 0).astype(acc, copy=False)
    g_soft = g_loss
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
    shift32 = np.where(exact, 0.0, shift).astype(acc)

    def block(lo: int, hi: int) -> None:
        xb = logits[lo:hi].astype(acc) if half else logits[lo:hi]
        o = np.empty_like(xb) if half else gx[lo:hi]
        np.subtract(xb, shift32[lo:hi, None], out=o)
        with np.errstate(over="ignore"):
            np.exp(o, out=o)
        if not folded:
            o *= g_soft[lo:hi, None]
        redo = exact[lo:hi]
        if redo.any():
            # large logits: the max-shifted softmax, as in the forward's slow path
            rows = xb[redo]
            e = np.exp(rows - rows.max(axis=1, keepdims=True))
            e *= (g_soft[lo:hi][redo] / e.sum(axis=1))[:, None]
            o[redo] = e
        gb = g_loss[lo:hi]
        o[np.arange(hi - lo), safe[lo:hi]] -= (1 - eps) * gb
        if eps:
            o -= (eps / c * gb)[:, None]
        if half:
            gx[lo:hi] = o

    _parallel_rows(r, c, block)
    return gx


def cross_entropy_soft(logits: np.ndarray, probs: np.ndarray, label_smoothing: float) -> np.ndarray:
    """Per-row loss -sum_c t_c log_softmax(x)_c of (R, C) logits against (R, C) probabilities
    (float32 for float16/bfloat16 logits, computed in float32)."""
    acc = _acc(logits.dtype)
    logp = log_softmax(logits.astype(acc, copy=False), 1)
    t = _smooth(probs.astype(acc, copy=False), label_smoothing)
    return np.asarray(-(t * logp).sum(axis=1))


def cross_entropy_soft_backward(
    grad: np.ndarray, logits: np.ndarray, probs: np.ndarray, label_smoothing: float
) -> tuple[np.ndarray, np.ndarray]:
    acc = _acc(logits.dtype)
    logp = log_softmax(logits.astype(acc, copy=False), 1)
    t = _smooth(probs.astype(acc, copy=False), label_smoothing)
    g = grad[:, None]
    # d/dx_j = sum(t) softmax_j - t_j;  d/dt_j = -(1 - eps) log_softmax_j
    gx = (np.exp(logp) * t.sum(axis=1, keepdims=True) - t) * g
    gt = logp * (-(1 - label_smoothing) * g)
    # half inputs: computed in float32, the gradients return to the inputs' dtypes
    return gx.astype(logits.dtype, copy=False), gt.astype(probs.dtype, copy=False)


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
