"""NumPy kernels of scaled dot-product attention, forward and backward."""

from __future__ import annotations

import numpy as np

from .softmax import softmax


def _scores(
    q: np.ndarray, k: np.ndarray, bias: np.ndarray, scale: float, is_causal: bool
) -> np.ndarray:
    """softmax(q k^T * scale + bias [+ causal mask]) of shape (..., L, S).

    A row whose scores are all -inf (every key masked out) gives weights 0, not NaN, as
    PyTorch's attention does: such a query attends to nothing, and no gradient flows through it.
    """
    s = q @ np.swapaxes(k, -1, -2)
    s *= s.dtype.type(scale)
    if bias.ndim:
        s = s + bias
    if is_causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, s.dtype.type(-np.inf))
    p = softmax(np.ascontiguousarray(s), s.ndim - 1)
    if s.size:
        dead = s.max(axis=-1, keepdims=True) == -np.inf  # a NaN score keeps its row NaN
        if dead.any():
            p = np.where(dead, p.dtype.type(0), p)
    return p


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    keep: np.ndarray,
    scale: float,
    is_causal: bool,
) -> np.ndarray:
    with np.errstate(
        invalid="ignore"
    ):  # a fully masked row's softmax is NaN before _scores zeroes it
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
