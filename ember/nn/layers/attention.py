"""Attention layers: MultiHeadAttention (and the core MultiheadAttention shares), a pre-norm
TransformerBlock, RotaryEncoding."""

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


class _AttentionCore(Module):
    """Parameters and math shared by ``MultiHeadAttention`` and ``MultiheadAttention``:
    ``in_proj_weight`` ``[3E, E]``, ``in_proj_bias`` ``[3E]``, ``out_proj`` (PyTorch's names),
    and one batch-first attention through the fused ``scaled_dot_product_attention`` row."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if num_heads <= 0 or embed_dim % num_heads:
            raise ShapeError(
                f"{name}: expected embed_dim divisible by num_heads, got {embed_dim} and "
                f"{num_heads}."
            )
        if not 0.0 <= dropout < 1.0:
            raise ShapeError(f"{name}: expected 0 <= dropout < 1, got {dropout}.")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, float(dropout)
        e = embed_dim
        self.kdim, self.vdim = kdim or e, vdim or e
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.in_proj_weight: Param | None = None
        if self.kdim == e and self.vdim == e:
            self.in_proj_weight = Param(init.xavier_uniform((3 * e, e), **kw))
        else:  # keys / values of other widths: three weights, as PyTorch names them
            self.q_proj_weight = Param(init.xavier_uniform((e, e), **kw))
            self.k_proj_weight = Param(init.xavier_uniform((e, self.kdim), **kw))
            self.v_proj_weight = Param(init.xavier_uniform((e, self.vdim), **kw))
        self.in_proj_bias = Param(init.zeros((3 * e,), **kw)) if bias else None
        self.out_proj = Linear(e, e, bias, **kw)
        if bias and self.out_proj.bias is not None:
            self.out_proj.bias._replace(init.zeros((e,), **kw))

    def _heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        # (B, T, E) -> (B, H, T, E / H)
        return x.reshape((b, t, self.num_heads, -1)).swap_dims(1, 2)

    def _attend(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        key_padding_mask: Tensor | None,
        attn_mask: Tensor | None,
        is_causal: bool,
        need_weights: bool = False,
        average_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Batch-first attention: query ``(B, T, E)``, key/value ``(B, S, E)`` (``None``: the
        query; a value of ``None`` is the key) -> output ``(B, T, E)`` and, with
        ``need_weights``, the attention weights ``(B, T, S)`` (``(B, H, T, S)`` unless
        ``average_weights``); masks as the class docstrings say."""
        e, h = self.embed_dim, self.num_heads
        name = type(self).__name__
        key = query if key is None else key
        value = key if value is None else value
        for label, x, width in (("query", query, e), ("key", key, self.kdim),
                                ("value", value, self.vdim)):  # fmt: skip
            if x.ndim != 3 or x.shape[-1] != width:
                raise ShapeError(
                    f"{name}: expected a {label} (B, L, {width}), got shape {x.shape}."
                )
        b, t, s = query.shape[0], query.shape[1], key.shape[1]
        if key.shape[0] != b or value.shape[:2] != key.shape[:2]:
            raise ShapeError(
                f"{name}: expected key and value (B, S, E) with the query's batch, got query "
                f"{query.shape}, key {key.shape}, value {value.shape}."
            )
        attn_mask = _check_masks(name, b, h, t, s, key_padding_mask, attn_mask)
        bias = None if self.in_proj_bias is None else self.in_proj_bias.val()
        if self.in_proj_weight is not None and key is query and value is query:
            # self-attention: one projection matmul
            qkv = F.linear(query, self.in_proj_weight.val(), bias)
            q, k, v = qkv[..., :e], qkv[..., e : 2 * e], qkv[..., 2 * e :]
        else:
            ws = self._proj_weights()
            bs = [None if bias is None else bias[i * e : (i + 1) * e] for i in range(3)]
            q = F.linear(query, ws[0], bs[0])
            k = F.linear(key, ws[1], bs[1])
            v = F.linear(value, ws[2], bs[2])
        k, v, key_padding_mask, attn_mask = self._extend_kv(k, v, key_padding_mask, attn_mask)
        s = k.shape[1]
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        p = self.dropout if self.training else 0.0
        weights: Tensor | None = None
        if need_weights:
            mask = _combine_masks(query, t, s, key_padding_mask, attn_mask, is_causal)
            out, weights = _weighted_attention(q, k, v, mask, p)
            if average_weights:
                weights = weights.mean(1)
        else:
            causal_only = is_causal and key_padding_mask is None and attn_mask is None
            # a causal mask alone is the row's own is_causal: no mask tensor to build
            mask = (
                None
                if causal_only
                else _combine_masks(query, t, s, key_padding_mask, attn_mask, is_causal)
            )
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal_only
            )
        out = out.swap_dims(1, 2).reshape((b, t, e))  # (B, H, T, D) -> (B, T, E)
        return self.out_proj(out), weights

    def _proj_weights(self) -> list[Tensor]:
        """The query, key and value projection weights ``[E, E]``, ``[E, kdim]``,
        ``[E, vdim]``."""
        if self.in_proj_weight is not None:
            w, e = self.in_proj_weight.val(), self.embed_dim
            return [w[i * e : (i + 1) * e] for i in range(3)]
        return [self.q_proj_weight.val(), self.k_proj_weight.val(), self.v_proj_weight.val()]

    def _extend_kv(
        self, k: Tensor, v: Tensor, key_padding_mask: Tensor | None, attn_mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """Projected keys and values ``(B, S, E)`` with any extra positions (none here) and the
        masks widened to match; ``MultiheadAttention`` adds PyTorch's ``bias_k`` and zeros."""
        return k, v, key_padding_mask, attn_mask

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, num_heads={self.num_heads}"


class MultiHeadAttention(_AttentionCore):
    """Multi-head attention with PyTorch's parameters (``in_proj_weight`` ``[3E, E]``,
    ``in_proj_bias``, ``out_proj``), batch first, returning only the output.

    Masks follow ``torch.nn.MultiheadAttention``: ``key_padding_mask`` (B, S), bool (True marks
    padding to ignore) or float (added); ``attn_mask`` (T, S), (B * H, T, S) or (B, H, T, S):
    bool (True = not allowed) or float (added to the scores); ``is_causal`` masks future
    positions (with ``attn_mask`` too, both apply). ``em.nn.MultiheadAttention`` is the same
    layer with PyTorch's call (sequence first by default, ``(output, weights)``).

    Shapes: query ``(B, T, E)``, key/value ``(B, S, E)`` (default: the query) -> ``(B, T, E)``.

    Example:
        >>> mha = MultiHeadAttention(16, 4)
        >>> mha(Tensor.ones((2, 5, 16)), is_causal=True).shape
        (2, 5, 16)
    """

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
        return self._attend(query, key, value, key_padding_mask, attn_mask, is_causal)[0]


def _check_masks(
    name: str,
    b: int,
    h: int,
    t: int,
    s: int,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
) -> Tensor | None:
    """Check the mask shapes; returns ``attn_mask`` with a (B * H, T, S) one as (B, H, T, S)."""
    if key_padding_mask is not None and key_padding_mask.shape != (b, s):
        raise ShapeError(
            f"{name}: expected a key_padding_mask (B, S) = ({b}, {s}), got shape "
            f"{key_padding_mask.shape}."
        )
    if attn_mask is None:
        return None
    shape = attn_mask.shape
    if len(shape) == 3 and shape == (b * h, t, s):
        return attn_mask.reshape((b, h, t, s))
    four = len(shape) == 4 and all(n in (1, m) for n, m in zip(shape, (b, h, t, s)))
    if shape != (t, s) and not four:
        raise ShapeError(
            f"{name}: expected an attn_mask (T, S) = ({t}, {s}), (B * H, T, S) = ({b * h}, {t}, "
            f"{s}) or (B, H, T, S) = ({b}, {h}, {t}, {s}), got shape {shape}."
        )
    return attn_mask


def _weighted_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float
) -> tuple[Tensor, Tensor]:
    """``softmax(q k^T / sqrt(D) + mask) v`` written out, for callers that read the weights:
    q ``(B, H, T, D)``, k/v ``(B, H, S, D)`` -> output ``(B, H, T, D)``, weights
    ``(B, H, T, S)`` (after dropout, as PyTorch returns them)."""
    scores = (q @ k.swap_dims(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.mask_fill(~mask, -math.inf) if mask.dtype.is_bool else scores + mask
    weights = F.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, True)
    return weights @ v, weights


def _combine_masks(
    x: Tensor,
    t: int,
    s: int,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    is_causal: bool,
) -> Tensor | None:
    """One SDPA mask: bool (True = attend) when every mask is bool, else additive float (in
    ``x``'s dtype, -inf where a bool mask disallows)."""
    dev = x.device.without_autodiff()
    allowed: list[Tensor] = []
    added: list[Tensor] = []

    def take(m: Tensor) -> None:
        m = m.without_autodiff().to_device(dev)
        if m.dtype.is_float:
            added.append(m if m.dtype is x.dtype else m.cast(x.dtype))
        else:
            allowed.append(~m.bool())

    if key_padding_mask is not None:
        take(key_padding_mask.reshape((key_padding_mask.shape[0], 1, 1, s)))
    if is_causal:
        i = Tensor.arange(0, t, device=dev).reshape((t, 1))
        j = Tensor.arange(0, s, device=dev).reshape((1, s))
        allowed.append(i >= j)
    if attn_mask is not None:
        take(attn_mask)
    keep = None
    for a in allowed:
        keep = a if keep is None else keep & a
    if not added:
        return keep
    total = added[0]
    for a in added[1:]:
        total = total + a
    if keep is None:
        return total
    zeros = Tensor.zeros(keep.shape, device=dev, dtype=x.dtype)
    return total + zeros.mask_fill(~keep, -math.inf)


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
