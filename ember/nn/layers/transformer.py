"""PyTorch's Transformer layers: ``TransformerEncoderLayer``, ``TransformerDecoderLayer`` and the
``TransformerEncoder`` / ``TransformerDecoder`` stacks, with PyTorch's parameter names (a
PyTorch state_dict loads unchanged) and call.

Attention is ``MultiheadAttention`` (the fused attention row) and the norms are ``LayerNorm``
(the fused layer-norm row), so gradient checkpointing and ``em.capture`` see the same rows as
any other model. Masks follow PyTorch: bool masks mark with True what may not be attended,
float masks are added to the scores; ``is_causal`` masks future positions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import DTypeError, ShapeError
from .. import functional as F
from ..module import Module
from ..param import Param, ParamId, _relift
from .activation import Dropout
from .container import ModuleList
from .linear import Linear
from .multihead import MultiheadAttention, to_batch_first
from .norm import LayerNorm

Activation = str | Callable[[Tensor], Tensor]


class _Layer(Module):
    """What both layers share: the feed-forward block, the activation and the layout."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int,
        dropout: float,
        activation: Activation,
        layer_norm_eps: float,
        batch_first: bool,
        norm_first: bool,
        bias: bool,
        device: Device | None,
        dtype: DType,
        cross: bool,
    ) -> None:
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, **kw
        )
        if cross:
            self.multihead_attn = MultiheadAttention(
                d_model, nhead, dropout, bias, batch_first=batch_first, **kw
            )
        self.linear1 = Linear(d_model, dim_feedforward, bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm_first, self.batch_first, self.d_model = (
            bool(norm_first),
            bool(batch_first),
            d_model,
        )
        for i in range(1, 4 if cross else 3):
            setattr(self, f"norm{i}", LayerNorm(d_model, layer_norm_eps, bias=bias, **kw))
        for i in range(1, 4 if cross else 3):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(type(self).__name__, activation)

    def _ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))

    def _input(self, x: Tensor, label: str) -> Tensor:
        """``x`` checked and in the batch-first layout ``(B, L, d_model)``."""
        if x.ndim not in (2, 3) or x.shape[-1] != self.d_model:
            layout = "(B, L, E)" if self.batch_first else "(L, B, E)"
            raise ShapeError(
                f"{type(self).__name__}: expected {label} {layout} or unbatched (L, E) with "
                f"E = d_model = {self.d_model}, got shape {x.shape}."
            )
        return to_batch_first(x, self.batch_first)

    def _output(self, x: Tensor, unbatched: bool) -> Tensor:
        if unbatched:
            return x.squeeze_dim(0)
        return x if self.batch_first else x.swap_dims(0, 1)

    def extra_repr(self) -> str:
        return f"batch_first={self.batch_first}, norm_first={self.norm_first}"


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block, each with a residual and a layer norm, as
    ``torch.nn.TransformerEncoderLayer`` (same arguments, parameter names and call).

    Post-norm (default): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``; ``norm_first=True``:
    ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``, where ``ff`` is
    ``linear2(dropout(activation(linear1(x))))``. ``activation`` is ``"relu"``, ``"gelu"``
    (exact) or a callable (a function or an ``em.nn`` module).

    Shapes: src ``(S, B, E)`` (``(B, S, E)`` with ``batch_first=True``, unbatched ``(S, E)``)
    unchanged; ``src_mask`` (S, S) or (B * nhead, S, S); ``src_key_padding_mask`` (B, S).

    Example:
        >>> layer = TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> layer(Tensor.ones((2, 5, 16)), is_causal=True).shape
        (2, 5, 16)
    """

    self_attn: MultiheadAttention
    norm1: LayerNorm
    norm2: LayerNorm
    dropout1: Dropout
    dropout2: Dropout

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(
            d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
            norm_first, bias, device, dtype, cross=False,
        )  # fmt: skip

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = self._input(src, "src")
        kpm = _batched_mask(src_key_padding_mask, src.ndim == 2)
        return self._output(self._encode(x, src_mask, kpm, is_causal), src.ndim == 2)

    def _encode(
        self, x: Tensor, mask: Tensor | None, kpm: Tensor | None, is_causal: bool
    ) -> Tensor:
        """The layer on a batch-first ``(B, S, E)`` input."""
        if self.norm_first:
            x = x + self._sa(self.norm1(x), mask, kpm, is_causal)
            return x + self.dropout2(self._ff(self.norm2(x)))
        x = self.norm1(x + self._sa(x, mask, kpm, is_causal))
        return self.norm2(x + self.dropout2(self._ff(x)))

    def _sa(self, x: Tensor, mask: Tensor | None, kpm: Tensor | None, is_causal: bool) -> Tensor:
        return self.dropout1(self.self_attn._attend(x, x, x, kpm, mask, is_causal)[0])


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over ``memory`` (``multihead_attn``) and a feed-forward block,
    each with a residual and a layer norm (``norm1``, ``norm2``, ``norm3``), as
    ``torch.nn.TransformerDecoderLayer`` (same arguments, parameter names and call).

    Post-norm by default; ``norm_first=True`` normalises each block's input instead.

    Shapes: tgt ``(T, B, E)``, memory ``(S, B, E)`` (batch first with ``batch_first=True``;
    unbatched ``(T, E)`` / ``(S, E)``) -> shaped as tgt; ``tgt_mask`` (T, T) or
    (B * nhead, T, T); ``memory_mask`` (T, S) or (B * nhead, T, S); key padding masks
    ``(B, T)`` / ``(B, S)``.

    Example:
        >>> layer = TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> layer(Tensor.ones((2, 5, 16)), Tensor.ones((2, 7, 16)), tgt_is_causal=True).shape
        (2, 5, 16)
    """

    self_attn: MultiheadAttention
    multihead_attn: MultiheadAttention
    norm1: LayerNorm
    norm2: LayerNorm
    norm3: LayerNorm
    dropout1: Dropout
    dropout2: Dropout
    dropout3: Dropout

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(
            d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
            norm_first, bias, device, dtype, cross=True,
        )  # fmt: skip

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x, mem, unbatched = self._pair(tgt, memory)
        tkpm = _batched_mask(tgt_key_padding_mask, unbatched)
        mkpm = _batched_mask(memory_key_padding_mask, unbatched)
        y = self._decode(x, mem, tgt_mask, memory_mask, tkpm, mkpm, tgt_is_causal, memory_is_causal)
        return self._output(y, unbatched)

    def _pair(self, tgt: Tensor, memory: Tensor) -> tuple[Tensor, Tensor, bool]:
        x, mem = self._input(tgt, "tgt"), self._input(memory, "memory")
        if tgt.ndim != memory.ndim or x.shape[0] != mem.shape[0]:
            raise ShapeError(
                f"{type(self).__name__}: expected tgt and memory with the same batch size (or "
                f"both unbatched), got shapes {tgt.shape} and {memory.shape}."
            )
        return x, mem, tgt.ndim == 2

    def _decode(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None,
        memory_mask: Tensor | None,
        tgt_kpm: Tensor | None,
        memory_kpm: Tensor | None,
        tgt_is_causal: bool,
        memory_is_causal: bool,
    ) -> Tensor:
        """The layer on batch-first ``(B, T, E)`` / ``(B, S, E)`` inputs."""

        def sa(h: Tensor) -> Tensor:
            out = self.self_attn._attend(h, h, h, tgt_kpm, tgt_mask, tgt_is_causal)[0]
            return self.dropout1(out)

        def mha(h: Tensor) -> Tensor:
            out = self.multihead_attn._attend(
                h, memory, memory, memory_kpm, memory_mask, memory_is_causal
            )[0]
            return self.dropout2(out)

        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + mha(self.norm2(x))
            return x + self.dropout3(self._ff(self.norm3(x)))
        x = self.norm1(x + sa(x))
        x = self.norm2(x + mha(x))
        return self.norm3(x + self.dropout3(self._ff(x)))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers.0``, ``layers.1``, ...: each starts
    from the layer's values, with its own parameters), then ``norm`` if given, as
    ``torch.nn.TransformerEncoder``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch's signature; ember has
    no nested tensors, so outputs at padded positions are computed like any other (PyTorch's
    inference fast path gives zeros there).

    Shapes: as ``TransformerEncoderLayer``; ``mask`` is its ``src_mask``.

    Example:
        >>> layer = TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> TransformerEncoder(layer, 2)(Tensor.ones((2, 5, 16))).shape
        (2, 5, 16)
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        _check_stack("TransformerEncoder", encoder_layer, TransformerEncoderLayer, num_layers)
        self.layers = ModuleList(_fresh_copy(encoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        layers = [cast(TransformerEncoderLayer, m) for m in self.layers]
        first = layers[0]
        x = first._input(src, "src")  # one layout change for the whole stack
        kpm = _batched_mask(src_key_padding_mask, src.ndim == 2)
        for layer in layers:
            x = layer._encode(x, mask, kpm, bool(is_causal))
        if self.norm is not None:
            x = self.norm(x)
        return first._output(x, src.ndim == 2)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (``layers.0``, ...), then ``norm`` if given,
    as ``torch.nn.TransformerDecoder``.

    Shapes: as ``TransformerDecoderLayer``.

    Example:
        >>> layer = TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        >>> TransformerDecoder(layer, 2)(Tensor.ones((2, 5, 16)), Tensor.ones((2, 3, 16))).shape
        (2, 5, 16)
    """

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ) -> None:
        super().__init__()
        _check_stack("TransformerDecoder", decoder_layer, TransformerDecoderLayer, num_layers)
        self.layers = ModuleList(_fresh_copy(decoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        layers = [cast(TransformerDecoderLayer, m) for m in self.layers]
        first = layers[0]
        x, mem, unbatched = first._pair(tgt, memory)
        tkpm = _batched_mask(tgt_key_padding_mask, unbatched)
        mkpm = _batched_mask(memory_key_padding_mask, unbatched)
        for layer in layers:
            x = layer._decode(
                x, mem, tgt_mask, memory_mask, tkpm, mkpm, bool(tgt_is_causal), memory_is_causal
            )
        if self.norm is not None:
            x = self.norm(x)
        return first._output(x, unbatched)


def _activation(op: str, activation: Activation) -> Callable[[Tensor], Tensor]:
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise ShapeError(
            f"{op}: expected activation 'relu', 'gelu' or a callable, got {activation!r}."
        )
    if not callable(activation):
        raise DTypeError(
            f"{op}: expected activation 'relu', 'gelu' or a callable, got "
            f"{type(activation).__name__}. Pass e.g. em.nn.functional.silu or em.nn.GELU()."
        )
    return activation


def _batched_mask(mask: Tensor | None, unbatched: bool) -> Tensor | None:
    """A key padding mask ``(S,)`` of an unbatched input as ``(1, S)``."""
    return mask.unsqueeze_dim(0) if unbatched and mask is not None else mask


def _check_stack(op: str, layer: Module, kind: type, num_layers: int) -> None:
    if not isinstance(layer, kind):
        raise DTypeError(
            f"{op}: expected an em.nn.{kind.__name__} to copy, got {type(layer).__name__}."
        )
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
        raise ShapeError(f"{op}: expected num_layers >= 1, got {num_layers!r}.")


def _fresh_copy(module: Module) -> Module:
    """A copy with the same values whose parameters are new (fresh leaves, new ``ParamId``s),
    as PyTorch's deep copy of a layer; configuration and buffers are shared (immutable)."""

    def fp(p: Param) -> Param:
        v = p.val()
        q = p._copy(
            _relift(v.without_autodiff(), v.gradient_checkpointing_strategy(), p._trainable)
        )
        q.id = ParamId()
        return q

    return module._clone(fp, lambda b: b)
