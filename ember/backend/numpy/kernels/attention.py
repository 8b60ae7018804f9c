"""NumPy kernels of scaled dot-product attention: the forward and the weights it uses.

The backward is the attention row's generic rule (``ember/ops/nn.py``), which reads
``attention_weights``; a fused NumPy backward measured no faster than it.
"""

from __future__ import annotations

import numpy as np

from .matmul import matmul
from .softmax import softmax


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
    p = attention_weights(q, k, bias, scale, is_causal)
    if keep.ndim:
        p = p * keep
    return np.asarray(matmul(p, v)).astype(q.dtype, copy=False)
