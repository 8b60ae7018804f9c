"""Fused backward kernels: optional replacements for the generic rules of fused rows.

A row of ``ember/ops`` that names one (``OpSpec.fused_backward``) has its backward written once,
backend-agnostic, in the row. A backend may supply a fused kernel of that name (cuDNN / flash
attention, ATen's ``native_layer_norm_backward``) by overriding the method here; the defaults
return ``NotImplemented``, which means "run the row's rule". Which kernels a backend class
overrides is decided once, when the class is made (``fused_backwards``), never looked up per call.

A kernel is called as ``kernel(grad, *saved, **attrs)``: ``saved`` is the row's inputs (rows that
save them) followed by its output (rows that save it), ``attrs`` the row's attributes by name.
It returns one gradient per input (a single array for one-input rows), in any broadcast shape
the engine can sum back, or ``NotImplemented`` to decline these inputs (the rule runs instead).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import NotImplementedType
from typing import Any, ClassVar

from .types import Raw

Declined = NotImplementedType  # what a kernel returns for inputs it leaves to the row's rule


class FusedBackwards:
    """Defaults of every fused backward kernel a row may name: none supplied."""

    # kernel name -> the callable a subclass supplies; filled by __init_subclass__
    fused_backwards: ClassVar[dict[str, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.fused_backwards = _supplied(cls)

    def softmax_backward(self, grad: Raw, out: Raw, dim: int) -> Raw | Declined:
        """The gradient of ``softmax`` from its output."""
        return NotImplemented

    def log_softmax_backward(self, grad: Raw, out: Raw, dim: int) -> Raw | Declined:
        """The gradient of ``log_softmax`` from its output."""
        return NotImplemented

    def layer_norm_backward(
        self, grad: Raw, x: Raw, weight: Raw, bias: Raw, normalized_ndim: int, eps: float
    ) -> tuple[Raw, Raw, Raw] | Declined:
        """(grad x, grad weight, grad bias)."""
        return NotImplemented

    def batch_norm_backward(
        self, grad: Raw, x: Raw, weight: Raw, bias: Raw, eps: float
    ) -> tuple[Raw, Raw, Raw] | Declined:
        """(grad x, grad weight, grad bias) of the training form (batch statistics)."""
        return NotImplemented

    def attention_backward(
        self, grad: Raw, q: Raw, k: Raw, v: Raw, bias: Raw, keep: Raw, scale: float, is_causal: bool
    ) -> tuple[Raw, ...] | Declined:
        """(grad q, grad k, grad v, grad bias, grad keep)."""
        return NotImplemented


_KERNELS = tuple(
    n for n, v in vars(FusedBackwards).items() if inspect.isfunction(v) and not n.startswith("_")
)


def _supplied(cls: type) -> dict[str, Callable[..., Any]]:
    """The fused kernels ``cls`` overrides, as plain callables (kernels are static)."""
    out: dict[str, Callable[..., Any]] = {}
    for name in _KERNELS:
        raw = inspect.getattr_static(cls, name)
        if raw is vars(FusedBackwards)[name]:
            continue
        if isinstance(raw, staticmethod):
            out[name] = raw.__func__
        elif inspect.isfunction(raw):
            raise TypeError(
                f"{cls.__name__}.{name}: a fused backward kernel is declared as a staticmethod "
                "(it is called without the backend); got a method. Wrap it in staticmethod()."
            )
        else:
            out[name] = raw  # a library kernel assigned directly
    return out
