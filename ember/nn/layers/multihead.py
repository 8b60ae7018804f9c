"""``MultiheadAttention``: PyTorch's spelling and call of multi-head attention."""

from __future__ import annotations

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import ShapeError
from .attention import _AttentionCore


class MultiheadAttention(_AttentionCore):
    """Multi-head attention called as ``torch.nn.MultiheadAttention``, with its parameter
    names (``in_proj_weight`` ``[3E, E]``, ``in_proj_bias`` ``[3E]``, ``out_proj.weight``,
    ``out_proj.bias``): a PyTorch state_dict loads unchanged. The math is
    ``MultiHeadAttention``'s (the fused attention row); ``need_weights=True`` writes the
    softmax out to return the weights, as PyTorch's slow path does.

    Masks: ``key_padding_mask`` (B, S), bool (True marks padding to ignore) or float (added);
    ``attn_mask`` (T, S) or (B * num_heads, T, S), bool (True = not allowed) or float (added to
    the scores). ``is_causal=True`` masks future positions; PyTorch reads it as a hint that
    ``attn_mask`` is causal, here it applies on its own too (with ``attn_mask``, both apply).

    Shapes: query ``(T, B, E)``, key/value ``(S, B, E)`` (``(B, T, E)`` / ``(B, S, E)`` with
    ``batch_first=True``; unbatched ``(T, E)`` / ``(S, E)``) -> ``(output, weights)``: output
    shaped as the query; weights ``(B, T, S)`` (``(B, H, T, S)`` when
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
        unsupported = [
            name
            for name, on in (
                ("add_bias_kv=True", add_bias_kv),
                ("add_zero_attn=True", add_zero_attn),
                (f"kdim={kdim}", kdim not in (None, embed_dim)),
                (f"vdim={vdim}", vdim not in (None, embed_dim)),
            )
            if on
        ]
        if unsupported:
            raise ShapeError(
                f"MultiheadAttention: expected keys and values of embed_dim ({embed_dim}) with "
                f"no extra key/value rows, got {', '.join(unsupported)}. Project the keys and "
                "values to embed_dim first (an em.nn.Linear) and leave these options off."
            )
        super().__init__(embed_dim, num_heads, dropout, bias, device=device, dtype=dtype)
        self.batch_first = bool(batch_first)

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

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def to_batch_first(x: Tensor, batch_first: bool) -> Tensor:
    """``(L, B, E)`` (or ``(B, L, E)`` when ``batch_first``) or unbatched ``(L, E)`` ->
    ``(B, L, E)``."""
    if x.ndim == 2:
        return x.unsqueeze_dim(0)
    return x if batch_first else x.swap_dims(0, 1)
