"""NumPy kernels of scaled dot-product attention: the forward, its weights and a fused backward.

The forward and the fused backward cut the batch (its leading dimension) into one share per pool
thread, so each share runs every product, mask and softmax of its slice: one hand-off per call
where the generic rule (``ember/ops/nn.py``) pays one per product, and those products of
(64, 64) matrices gain nothing from being split alone. A share's rows are computed as the whole
batch's are, so the result has the same bits on any number of threads. Other dtypes (float16,
bfloat16) and inputs whose batch a bias or mask would widen run as one share (the forward) or
go to the rule (the backward).
"""

from __future__ import annotations

import math
from types import NotImplementedType

import numpy as np

from .matmul import matmul
from .softmax import softmax
from .threads import _parallel_split

_EXACT = (np.dtype(np.float32), np.dtype(np.float64))


def attention_weights(
    q: np.ndarray, k: np.ndarray, bias: np.ndarray, scale: float, is_causal: bool
) -> np.ndarray:
    """softmax(q k^T * scale + bias [+ causal mask]) of shape (..., L, S).

    A row whose scores are all -inf (every key masked out) gives weights 0, not NaN, as
    PyTorch's attention does: such a query attends to nothing, and no gradient flows through it.
    """
    with np.errstate(invalid="ignore"):  # a fully masked row's softmax is NaN until zeroed
        return _weights(q, k, bias, scale, is_causal)


_MASKS: dict[tuple[int, int], np.ndarray] = {}  # (L, S) -> the causal mask's masked-out cells


def _above_diagonal(L: int, S: int) -> np.ndarray:
    """(L, S) bool, True where key j > query i (the cells a causal mask hides), cached."""
    mask = _MASKS.get((L, S))
    if mask is None:
        if len(_MASKS) > 64:
            _MASKS.clear()
        mask = _MASKS[(L, S)] = ~np.tri(L, S, dtype=bool)
    return mask


def _weights(
    q: np.ndarray, k: np.ndarray, bias: np.ndarray, scale: float, is_causal: bool
) -> np.ndarray:
    s = matmul(q, np.swapaxes(k, -1, -2))  # a fresh array: the passes below write into it
    s *= s.dtype.type(scale)
    if bias.ndim:
        if bias.dtype == s.dtype and np.broadcast_shapes(s.shape, bias.shape) == s.shape:
            s += bias
        else:
            s = s + bias
    if is_causal:
        np.copyto(s, s.dtype.type(-np.inf), where=_above_diagonal(*s.shape[-2:]))
    p = softmax(np.ascontiguousarray(s), s.ndim - 1)
    # a row whose scores are all -inf comes out of the softmax as NaN (so its first weight is
    # NaN): only then is the exact check made (a NaN score keeps its row NaN)
    if s.size and s.shape[-1] and np.isnan(p[..., 0]).any():
        dead = s.max(axis=-1, keepdims=True) == -np.inf
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
    """softmax(q k^T * scale + bias [+ causal mask]) [* keep] @ v: (..., L, E), (..., S, E),
    (..., S, Ev) -> (..., L, Ev)."""
    batch = _batch(q, k, v, bias, keep)
    if batch is None:
        return _attend(q, k, v, bias, keep, scale, is_causal)
    out = np.empty((*batch, q.shape[-2], v.shape[-1]), dtype=q.dtype)

    def share(lo: int, hi: int) -> None:
        qs, ks, vs, bs, ms = _share_of(lo, hi, batch, q, k, v, bias, keep)
        p = attention_weights(qs, ks, bs, scale, is_causal)
        if keep.ndim:
            p *= ms
        np.matmul(p, vs, out=out[lo:hi])

    _parallel_split(batch[0], _score_elems(batch, q, k), share)
    return out


def attention_backward(
    grad: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    keep: np.ndarray,
    scale: float,
    is_causal: bool,
) -> tuple[np.ndarray, ...] | NotImplementedType:
    """(grad q, grad k, grad v, grad bias, grad keep) of ``attention``, the weights rebuilt from
    q, k and the bias. The bias and keep gradients have the weights' shape (the engine sums them
    to their inputs'); a 0-d bias or keep (none) gets a 0-d zero."""
    batch = _batch(q, k, v, bias, keep)
    if batch is None or grad.dtype != q.dtype or grad.shape != (*batch, q.shape[-2], v.shape[-1]):
        return NotImplemented
    if any(a.shape[:-2] != batch for a in (q, k, v)):
        return NotImplemented  # a broadcast q, k or v: its gradient is a sum over shares
    L, S = q.shape[-2], k.shape[-2]
    gq, gk, gv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    zero = np.zeros((), dtype=q.dtype)
    gbias = np.empty((*batch, L, S), dtype=q.dtype) if bias.ndim else zero
    gkeep = np.empty((*batch, L, S), dtype=q.dtype) if keep.ndim else zero

    def share(lo: int, hi: int) -> None:
        qs, ks, vs, bs, ms = _share_of(lo, hi, batch, q, k, v, bias, keep)
        g = grad[lo:hi]
        p = attention_weights(qs, ks, bs, scale, is_causal)
        np.matmul(np.swapaxes(p * ms if keep.ndim else p, -1, -2), g, out=gv[lo:hi])
        gp = np.matmul(g, np.swapaxes(vs, -1, -2))  # (b, ..., L, S)
        if keep.ndim:
            np.multiply(gp, p, out=gkeep[lo:hi])
            gp *= ms
        # softmax backward: p * (gp - rowsum(gp * p)); a fully masked row has p = 0 and gets 0
        gp -= np.vecdot(gp, p)[..., None]
        gp *= p
        if bias.ndim:
            gbias[lo:hi] = gp
        gp *= gp.dtype.type(scale)
        np.matmul(gp, ks, out=gq[lo:hi])
        np.matmul(np.swapaxes(gp, -1, -2), qs, out=gk[lo:hi])

    _parallel_split(batch[0], _score_elems(batch, q, k), share)
    return gq, gk, gv, gbias, gkeep


def _attend(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    keep: np.ndarray,
    scale: float,
    is_causal: bool,
) -> np.ndarray:
    p = attention_weights(q, k, bias, scale, is_causal)
    if keep.ndim:
        p = p * keep
    return np.asarray(matmul(p, v)).astype(q.dtype, copy=False)


def _batch(*xs: np.ndarray) -> tuple[int, ...] | None:
    """The batch dims of q, k and v, when the kernels can split it: float32 / float64 of one
    dtype, a leading batch dim of 2 or more, and a bias and keep mask (0-d: none) that broadcast
    into the scores without widening it. None otherwise."""
    q, k, v, bias, keep = xs
    if q.dtype not in _EXACT or any(a.dtype != q.dtype for a in xs):
        return None
    if min(q.ndim, k.ndim, v.ndim) < 3:
        return None
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scores = (*batch, q.shape[-2], k.shape[-2])
    for m in (bias, keep):
        if m.ndim and (m.ndim > len(scores) or np.broadcast_shapes(m.shape, scores) != scores):
            return None
    return batch if batch[0] >= 2 else None


def _share_of(
    lo: int, hi: int, batch: tuple[int, ...], *arrays: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Each array's part in the batch share ``[lo, hi)``: sliced where it has the leading batch
    dim, whole where it broadcasts along it (size 1 there, or fewer dims)."""
    rank = len(batch) + 2
    return tuple(a[lo:hi] if a.ndim == rank and a.shape[0] == batch[0] else a for a in arrays)


def _score_elems(batch: tuple[int, ...], q: np.ndarray, k: np.ndarray) -> int:
    """The attention's score elements, its work for the split threshold (about 3.5 ns each at
    (64, 64) scores of head size 32 on one core: 64K of them outweigh a thread hand-off)."""
    return math.prod(batch) * q.shape[-2] * k.shape[-2]
