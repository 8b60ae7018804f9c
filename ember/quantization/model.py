"""``quantize(model, scheme)``: replace the weights of chosen layers by frozen int8 ones."""

from __future__ import annotations

from typing import Any

from .._core.qscheme import QuantScheme
from .._core.quantized import QuantizedTensor
from ..errors import DTypeError
from ..nn.layers.linear import Embedding, Linear
from ..nn.module import Module
from ..nn.param import Param

DEFAULT_INCLUDE: tuple[type[Module], ...] = (Linear, Embedding)


def quantize(model: Module, scheme: QuantScheme, include: Any = DEFAULT_INCLUDE) -> Module:
    """Quantize the ``weight`` of every submodule of the types ``include``, in place.

    Each such weight becomes a frozen ``QuantizedTensor`` (no gradient; ``train()`` keeps it
    frozen), in the parameter's autodiff context; biases and other layers stay float, so an
    adapter (a float layer beside or after them) still trains. A weight shared by two layers
    (a GPT's tied embedding and head) is quantized once. ``model.save`` / ``model.load``
    store and restore the int8 values, scales and scheme exactly.

    Args:
        model: The module (changed in place, and returned).
        scheme: An ``em.QuantScheme``; ``("channel", 0)`` gives one scale per output feature
            of a Linear and per row of an Embedding.
        include: A layer type or tuple of types (default ``(nn.Linear, nn.Embedding)``).

    Returns:
        ``model``.

    Example:
        >>> net = em.nn.Sequential(em.nn.Linear(8, 4), em.nn.ReLU(), em.nn.Linear(4, 2))
        >>> _ = em.quantization.quantize(net, em.QuantScheme(granularity=("channel", 0)))
        >>> [p.val().is_quantized() for p in net.parameters()]
        [True, False, True, False]
    """
    if not isinstance(model, Module):
        raise DTypeError(f"quantize: expected an em.nn.Module, got {type(model).__name__}.")
    if not isinstance(scheme, QuantScheme):
        raise DTypeError(
            f"quantize: expected an em.QuantScheme, got {type(scheme).__name__}. Example: "
            "em.QuantScheme(granularity=('channel', 0))."
        )
    kinds = include if isinstance(include, tuple) else (include,)
    if not kinds or not all(isinstance(k, type) and issubclass(k, Module) for k in kinds):
        raise DTypeError(
            f"quantize: expected include to be module types (nn.Linear, nn.Embedding), got "
            f"{include!r}."
        )
    done: set[int] = set()
    for m in model.modules():
        p = getattr(m, "weight", None) if isinstance(m, kinds) else None
        if not isinstance(p, Param) or id(p) in done:
            continue
        done.add(id(p))
        quantize_param(p, scheme)
    return model


def quantize_param(p: Param, scheme: QuantScheme) -> None:
    """Put ``p``'s value, quantized under ``scheme``, in ``p``; frozen from now on."""
    value = p.val()
    if value.is_quantized():
        return
    frozen_in(p, value.without_autodiff().quantize(scheme))


def frozen_in(p: Param, q: QuantizedTensor) -> None:
    """Put the plain quantized tensor ``q`` in ``p``, in ``p``'s autodiff context, frozen."""
    strategy = p.val().gradient_checkpointing_strategy()
    if strategy is not None:
        q = q.autodiff().with_gradient_checkpointing_strategy(strategy)
    p._value = q  # type: ignore[assignment]
    p._trainable = False
