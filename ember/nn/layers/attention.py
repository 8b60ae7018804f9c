"""Attention layers: MultiHeadAttention, a pre-norm TransformerBlock, RotaryEncoding."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param
from .activation import GELU, Dropout, ReLU
from .linear import Linear
from .norm import LayerNorm


class MultiHeadAttention(Module):
    """Multi-head attention with PyTorch's parameters (``in_proj_weight`` ``[3E, E]``,
    ``in_proj_bias``, ``out_proj``), batch first.

    Masks follow ``torch.nn.MultiheadAttention``: ``key_padding_mask`` (B, S) bool, True marks
    padding to ignore; ``attn_mask`` (T, S) or (B, H, T, S): bool (True = not allowed) or float
    (added to the scores); ``is_causal`` masks future positions. Attention weights are not
    returned (only the output).

    Shapes: query ``(B, T, E)``, key/value ``(B, S, E)`` (default: the query) -> ``(B, T, E)``.

    Example:
        >>> mha = MultiHeadAttention(16, 4)
        >>> mha(Tensor.ones((2, 5, 16)), is_causal=True).shape
        (2, 5, 16)
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ShapeError(
                f"MultiHeadAttention: expected embed_dim divisible by num_heads, got {embed_dim} "
                f"and {num_heads}."
            )
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, float(dropout)
        e = embed_dim
        self.in_proj_weight = Param(init.xavier_uniform((3 * e, e), device=device, dtype=dtype))
        self.in_proj_bias = (
            Param(init.zeros((3 * e,), device=device, dtype=dtype)) if bias else None
        )
        self.out_proj = Linear(e, e, bias, device=device, dtype=dtype)
        if bias and self.out_proj.bias is not None:
            self.out_proj.bias._replace(init.zeros((e,), device=device, dtype=dtype))

    def _heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        # (B, T, E) -> (B, H, T, E / H)
        return x.reshape((b, t, self.num_heads, -1)).swap_dims(1, 2)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        e = self.embed_dim
        if query.ndim != 3 or query.shape[-1] != e:
            raise ShapeError(
                f"MultiHeadAttention: expected a query (B, T, {e}), got shape {query.shape}."
            )
        w = self.in_proj_weight.val()
        bias = None if self.in_proj_bias is None else self.in_proj_bias.val()
        if key is None and value is None:
            qkv = F.linear(query, w, bias)
            q, k, v = qkv[..., :e], qkv[..., e : 2 * e], qkv[..., 2 * e :]
        else:
            key = query if key is None else key
            value = key if value is None else value
            parts = [(w[i * e : (i + 1) * e], None if bias is None else bias[i * e : (i + 1) * e])
                     for i in range(3)]  # fmt: skip
            q = F.linear(query, *parts[0])
            k = F.linear(key, *parts[1])
            v = F.linear(value, *parts[2])
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        t, s = q.shape[2], k.shape[2]
        causal_only = is_causal and key_padding_mask is None and attn_mask is None
        # a causal mask alone is the row's own is_causal: no mask tensor to build
        mask = (
            None
            if causal_only
            else _combine_masks(query, t, s, key_padding_mask, attn_mask, is_causal)
        )
        p = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal_only
        )
        b = out.shape[0]
        out = out.swap_dims(1, 2).reshape((b, t, e))  # (B, H, T, D) -> (B, T, E)
        return self.out_proj(out)

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, num_heads={self.num_heads}"


def _combine_masks(
    x: Tensor,
    t: int,
    s: int,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    is_causal: bool,
) -> Tensor | None:
    """One SDPA mask: bool (True = attend) unless ``attn_mask`` is float (then additive)."""
    allowed: Tensor | None = None
    dev = x.device.without_autodiff()
    if key_padding_mask is not None:
        kpm = key_padding_mask.without_autodiff().to_device(dev).bool()
        allowed = ~kpm.reshape((kpm.shape[0], 1, 1, kpm.shape[1]))
    if is_causal:
        i = Tensor.arange(0, t, device=dev).reshape((t, 1))
        j = Tensor.arange(0, s, device=dev).reshape((1, s))
        causal = i >= j
        allowed = causal if allowed is None else allowed & causal
    if attn_mask is None:
        return allowed
    am = attn_mask.without_autodiff().to_device(dev)
    if am.dtype.is_bool:
        return ~am if allowed is None else allowed & ~am
    if allowed is None:
        return am
    zeros = Tensor.zeros(allowed.shape, device=dev, dtype=am.dtype)
    return am + zeros.mask_fill(~allowed, -math.inf)


class TransformerBlock(Module):
    """Pre-norm Transformer encoder block: ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``.

    Parameter names match ``torch.nn.TransformerEncoderLayer(norm_first=True, batch_first=True)``
    (``self_attn``, ``linear1``, ``linear2``, ``norm1``, ``norm2``).

    Shapes: ``(B, T, d_model)`` unchanged.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        activation: str = "gelu",
        eps: float = 1e-5,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, **kw)
        self.linear1 = Linear(d_model, d_ff, **kw)
        self.linear2 = Linear(d_ff, d_model, **kw)
        self.norm1 = LayerNorm(d_model, eps, **kw)
        self.norm2 = LayerNorm(d_model, eps, **kw)
        if activation not in ("gelu", "relu"):
            raise ShapeError(
                f"TransformerBlock: expected activation 'gelu' or 'relu', got {activation!r}."
            )
        self.activation = GELU() if activation == "gelu" else ReLU()
        self.dropout = Dropout(dropout)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        h = self.norm1(x)
        x = x + self.dropout1(
            self.self_attn(
                h, key_padding_mask=key_padding_mask, attn_mask=attn_mask, is_causal=is_causal
            )
        )
        h = self.linear2(self.dropout(self.activation(self.linear1(self.norm2(x)))))
        return x + self.dropout2(h)


class RotaryEncoding(Module):
    """Rotary position embedding (RoPE), half-split layout (GPT-NeoX / Hugging Face style).

    The last dim is split in halves ``(x1, x2)``; position ``t`` rotates each pair
    ``(x1_i, x2_i)`` by ``t * theta^(-2i / dim)``. No parameters.

    Shapes: ``(*, T, dim) -> (*, T, dim)``; ``start`` offsets the positions (for caching).
    """

    def __init__(self, dim: int, max_seq_len: int = 4096, theta: float = 10000.0) -> None:
        super().__init__()
        if dim % 2:
            raise ShapeError(f"RotaryEncoding: expected an even dim, got {dim}.")
        self.dim, self.max_seq_len, self.theta = dim, max_seq_len, float(theta)
        inv_freq = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
        angles = np.outer(np.arange(max_seq_len, dtype=np.float64), inv_freq)
        angles = np.concatenate([angles, angles], axis=-1)  # (max_seq_len, dim)
        self._cos_sin = (np.cos(angles), np.sin(angles))
        self._tables: dict[tuple[Device, str], tuple[Tensor, Tensor]] = {}

    def _table(self, x: Tensor) -> tuple[Tensor, Tensor]:
        dev = x.device.without_autodiff()
        key = (dev, x.dtype.name)
        tab = self._tables.get(key)
        if tab is None:
            cos, sin = self._cos_sin
            tab = (
                Tensor.from_data(cos, device=dev, dtype=x.dtype),
                Tensor.from_data(sin, device=dev, dtype=x.dtype),
            )
            self._tables[key] = tab
        return tab

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        t, d = x.shape[-2], x.shape[-1]
        if d != self.dim or start + t > self.max_seq_len:
            raise ShapeError(
                f"RotaryEncoding: expected (*, T, {self.dim}) with start + T <= "
                f"{self.max_seq_len}, got shape {x.shape} and start {start}."
            )
        cos, sin = self._table(x)
        cos, sin = cos[start : start + t], sin[start : start + t]
        half = d // 2
        rotated = Tensor.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    def extra_repr(self) -> str:
        return f"{self.dim}, max_seq_len={self.max_seq_len}, theta={self.theta}"
