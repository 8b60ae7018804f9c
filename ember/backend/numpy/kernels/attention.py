"""NumPy kernels of scaled dot-product attention: the forward and the weights it uses.

The backward is the attention row's generic rule (``ember/ops/nn.py``), which reads
``attention_weights``; a fused NumPy backward measured no faster than it.
"""

from __future__ import annotations

import numpy as np

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


def _weights(
    q: np.ndarray, k: np.ndarray, bias: np.ndarray, scale: float, is_causal: bool
) -> np.ndarray:
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
    p = attention_weights(q, k, bias, scale, is_causal)
    if keep.ndim:
        p = p * keep
    return np.asarray(p @ v).astype(q.dtype, copy=False)
