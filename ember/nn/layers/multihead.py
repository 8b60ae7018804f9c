"""``MultiheadAttention``: PyTorch's spelling and call of multi-head attention."""

from __future__ import annotations

import math

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import ShapeError
from .. import init
from ..param import Param
from .attention import _AttentionCore


class MultiheadAttention(_AttentionCore):
    """Multi-head attention called as ``torch.nn.MultiheadAttention``, with its parameter
    names (``in_proj_weight`` ``[3E, E]``, ``in_proj_bias`` ``[3E]``, ``out_proj.weight``,
    ``out_proj.bias``; with ``kdim`` / ``vdim`` other than ``embed_dim``: ``q_proj_weight``
    ``[E, E]``, ``k_proj_weight`` ``[E, kdim]``, ``v_proj_weight`` ``[E, vdim]``; with
    ``add_bias_kv``: ``bias_k``, ``bias_v`` ``[1, 1, E]``, appended as one more key and value;
    ``add_zero_attn`` appends a zero key and value): a PyTorch state_dict loads unchanged.
    The math is ``MultiHeadAttention``'s (the fused attention row); ``need_weights=True``
    writes the softmax out to return the weights, as PyTorch's slow path does.

    Masks: ``key_padding_mask`` (B, S), bool (True marks padding to ignore) or float (added);
    ``attn_mask`` (T, S) or (B * num_heads, T, S), bool (True = not allowed) or float (added to
    the scores). ``is_causal=True`` masks future positions; PyTorch reads it as a hint that
    ``attn_mask`` is causal, here it applies on its own too (with ``attn_mask``, both apply).

    Shapes: query ``(T, B, E)``, key/value ``(S, B, kdim / vdim)`` (batch first with
    ``batch_first=True``; unbatched ``(T, E)`` / ``(S, kdim / vdim)``) -> ``(output, weights)``:
    output shaped as the query; weights ``(B, T, S)`` (``(B, H, T, S)`` when
    ``average_attn_weights=False``) or ``None`` when ``need_weights=False``.

    Example:
        >>> mha = MultiheadAttention(16, 4)
        >>> x = Tensor.ones((5, 2, 16))
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        ((5, 2, 16), (2, 5, 5))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(
            embed_dim, num_heads, dropout, bias, kdim=kdim, vdim=vdim, device=device, dtype=dtype
        )
        self.batch_first, self.add_zero_attn = bool(batch_first), bool(add_zero_attn)
        self.bias_k: Param | None = None
        self.bias_v: Param | None = None
        if add_bias_kv:  # xavier-normal of a (1, 1, E) weight: std sqrt(2 / (E + E))
            std = math.sqrt(1.0 / embed_dim)
            for name in ("bias_k", "bias_v"):
                t = init.normal((1, 1, embed_dim), 0.0, std, device=device, dtype=dtype)
                setattr(self, name, Param(t))

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        unbatched = query.ndim == 2
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(
                "MultiheadAttention: expected query, key and value all of rank 3 (batched) or "
                f"all of rank 2 (unbatched), got shapes {query.shape}, {key.shape}, "
                f"{value.shape}."
            )
        q, k, v = (to_batch_first(x, self.batch_first) for x in (query, key, value))
        # keep the self-attention identity (one projection matmul) through the conversions
        k = q if key is query else k
        v = k if value is key else (q if value is query else v)
        if unbatched:
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze_dim(0)
            if attn_mask is not None and attn_mask.ndim == 3:  # (H, T, S)
                attn_mask = attn_mask.unsqueeze_dim(0)
        out, weights = self._attend(
            q, k, v, key_padding_mask, attn_mask, is_causal, need_weights, average_attn_weights
        )
        if unbatched:
            return out.squeeze_dim(0), None if weights is None else weights.squeeze_dim(0)
        return (out if self.batch_first else out.swap_dims(0, 1)), weights

    def _extend_kv(
        self, k: Tensor, v: Tensor, key_padding_mask: Tensor | None, attn_mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """``bias_k`` / ``bias_v`` then zeros appended as one more key and value position
        each (PyTorch's ``add_bias_kv`` / ``add_zero_attn``); the masks get a column that
        allows it."""
        b, _, e = k.shape
        extra: list[tuple[Tensor, Tensor]] = []
        if self.bias_k is not None and self.bias_v is not None:
            extra.append((self.bias_k.val(), self.bias_v.val()))
        if self.add_zero_attn:
            zero = Tensor.zeros((1, 1, e), device=k.device, dtype=k.dtype)
            extra.append((zero, zero))
        for bk, bv in extra:
            k = Tensor.cat([k, bk.expand((b, 1, e))], 1)
            v = Tensor.cat([v, bv.expand((b, 1, e))], 1)
            key_padding_mask = _allow_one_more(key_padding_mask)
            attn_mask = _allow_one_more(attn_mask)
        return k, v, key_padding_mask, attn_mask

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _allow_one_more(mask: Tensor | None) -> Tensor | None:
    """``mask`` with one more last-dim column that masks nothing (False / 0)."""
    if mask is None:
        return None
    col = Tensor.zeros((*mask.shape[:-1], 1), device=mask.device, dtype=mask.dtype)
    return Tensor.cat([mask, col], -1)


def to_batch_first(x: Tensor, batch_first: bool) -> Tensor:
    """``(L, B, E)`` (or ``(B, L, E)`` when ``batch_first``) or unbatched ``(L, E)`` ->
    ``(B, L, E)``."""
    if x.ndim == 2:
        return x.unsqueeze_dim(0)
    return x if batch_first else x.swap_dims(0, 1)
