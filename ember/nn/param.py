"""Parameters: a tensor plus a stable identity and its configured trainability.

Tensors are immutable, so a ``Param`` is the mutable slot a module keeps: optimizers, ``valid()``,
``train()`` and loading replace the tensor inside it while ``param.id`` stays the same.
"""

from __future__ import annotations

import secrets

from .._core.device import Device
from .._core.internal import param_leaf
from .._core.tensor import Tensor
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..dtype import DType
from ..errors import DTypeError

_Strategy = GradientCheckpointingStrategy


class ParamId:
    """A parameter's identity: a random 64-bit value, stable across steps, forks and reloads.

    Example:
        >>> pid = ParamId()
        >>> ParamId.parse(str(pid)) == pid
        True
    """

    __slots__ = ("value",)

    def __init__(self, value: int | None = None) -> None:
        self.value = secrets.randbits(64) if value is None else int(value)

    @staticmethod
    def parse(text: str) -> ParamId:
        """The id written by ``str(pid)`` (16 hex digits)."""
        try:
            return ParamId(int(text, 16))
        except (TypeError, ValueError):
            raise ValueError(
                f"ParamId.parse: expected 16 hex digits, got {text!r}. Use str(param.id)."
            ) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParamId) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return f"{self.value:016x}"

    def __repr__(self) -> str:
        return f"ParamId({self})"


def _relift(value: Tensor, strategy: _Strategy | None, trainable: bool) -> Tensor:
    """``value`` with context ``strategy`` (``None``: plain), a fresh leaf, require-grad if
    ``trainable`` and float."""
    if strategy is None:
        return value.without_autodiff()
    if value._ckpt_strategy is None:
        if value.is_quantized():  # a frozen int8 weight (em.quantization): never a leaf
            return value.autodiff().with_gradient_checkpointing_strategy(strategy)
        # plain -> autodiff leaf in one step (what an optimizer update gives back every step)
        return param_leaf(value, strategy, trainable)
    if value.gradient_checkpointing_strategy() is strategy:
        want = trainable and value.dtype.is_float
        if value.is_require_grad() == want and (want or not value.is_tracked()):
            return value  # already in the requested state: keep the leaf (and its identity)
    t = value.set_require_grad(False) if value.is_autodiff() else value.autodiff()
    if t.gradient_checkpointing_strategy() is not strategy:
        t = t.with_gradient_checkpointing_strategy(strategy)
    if trainable and t.dtype.is_float:
        t = t.require_grad()
    return t


class Param:
    """A module parameter: the current tensor, a ``ParamId`` and whether it is trainable.

    A float parameter created on an autodiff device becomes a require-grad leaf (when trainable).

    Args:
        value: The initial tensor.
        id: Identity to keep (a fresh one by default).
        require_grad: Configured trainability; ``no_grad()`` / ``freeze()`` switch it off.

    Example:
        >>> p = Param(Tensor.zeros((2, 3), device=Device.cpu().autodiff()))
        >>> p.shape, p.val().is_require_grad()
        ((2, 3), True)
    """

    __slots__ = ("_train_strategy", "_trainable", "_value", "id")

    def __init__(self, value: Tensor, *, id: ParamId | None = None, require_grad: bool = True):
        if not isinstance(value, Tensor):
            raise DTypeError(f"Param: expected an em.Tensor, got {type(value).__name__}.")
        self.id = ParamId() if id is None else id
        self._trainable = bool(require_grad)
        self._train_strategy = value.gradient_checkpointing_strategy()
        if self._train_strategy is not None:
            value = _relift(value, self._train_strategy, self._trainable)
        self._value = value

    def val(self) -> Tensor:
        """The current tensor."""
        return self._value

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> DType:
        return self._value.dtype

    @property
    def device(self) -> Device:
        return self._value.device

    def numel(self) -> int:
        return self._value.numel()

    def is_require_grad(self) -> bool:
        """Whether the current tensor is a require-grad leaf."""
        return self._value.is_require_grad()

    def is_trainable(self) -> bool:
        """The configured trainability (kept while the module is in ``valid()`` mode)."""
        return self._trainable

    # ------------------------------------------------------------------ used by Module/optim
    def _replace(self, value: Tensor) -> None:
        """Put ``value`` in, with this parameter's autodiff context and trainability."""
        s = self._value.gradient_checkpointing_strategy()
        self._value = _relift(value, s, self._trainable) if s is not None else value

    def _copy(self, value: Tensor | None = None) -> Param:
        p = Param.__new__(Param)
        p.id = self.id
        p._trainable = self._trainable
        p._train_strategy = self._train_strategy
        p._value = self._value if value is None else value
        return p

    def __repr__(self) -> str:
        return (
            f"Param(id={self.id}, shape={self.shape}, dtype={self.dtype.name}, "
            f"device={self._value.device!r}, require_grad={self.is_require_grad()})"
        )
