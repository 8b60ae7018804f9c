"""Gradient checkpointing strategies (SEMANTICS.md §7): the protocol and the built-in two.

A strategy answers one question per recorded op: does the node keep the values its backward
reads, or only a recipe (its row and its parents) to recompute them from during backward?
``GradientCheckpointingStrategy`` is the protocol; ``Disabled`` and ``Balanced`` are instances of
its two built-in subclasses, held as class attributes. A new strategy is one subclass.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..autodiff.node import Node
    from ..ops.registry import OpSpec


class _Listed(abc.ABCMeta):
    """Iterating the protocol class lists the built-in strategies (``Disabled``, ``Balanced``)."""

    _builtin: tuple[GradientCheckpointingStrategy, ...]

    def __iter__(cls) -> Iterator[GradientCheckpointingStrategy]:
        return iter(cls._builtin)


class GradientCheckpointingStrategy(metaclass=_Listed):
    """How an autodiff tensor's ops keep what backward needs ("keep, or recipe?").

    ``Disabled`` (the default): every op keeps what its backward reads.
    ``Balanced``: memory-bound ops keep only a recipe (their op and parents) and are recomputed
    during backward, once, from the nearest kept ancestors; compute-bound ops keep their outputs.

    A subclass implements ``keeps``; one that never answers ``False`` sets ``recipes = False``,
    so the recorder skips the checkpointing path (and the question) altogether. Strategies compare
    by value: same class and same ``_key()``. Whatever ``keeps`` answers, a node with an untracked
    parent is kept (an untracked value has no recipe), so gradients equal ``Disabled``'s bit for
    bit under any strategy.

    Example:
        >>> class KeepsReductions(em.GradientCheckpointingStrategy):
        ...     name = "KeepsReductions"
        ...     def keeps(self, spec, parents):
        ...         return not spec.memory_bound
        >>> t = em.Tensor.ones((3,)).autodiff().with_gradient_checkpointing_strategy(
        ...     KeepsReductions())
    """

    __slots__ = ()
    Disabled: ClassVar[GradientCheckpointingStrategy]
    Balanced: ClassVar[GradientCheckpointingStrategy]
    name: ClassVar[str] = "custom"  # shown in repr and error messages
    recipes: ClassVar[bool] = True  # False: ``keeps`` is always True (read on the record path)

    @abc.abstractmethod
    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        """True: the node of ``spec`` (inputs from ``parents``) keeps the values its backward
        reads; False: it keeps a recipe and its value is recomputed when a backward step needs
        it. ``parents[i]`` is the node of input ``i`` (``None``: untracked)."""

    def _key(self) -> tuple[Any, ...]:
        """The values a strategy is compared and hashed by (its parameters; none by default)."""
        return ()

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, GradientCheckpointingStrategy):
            return NotImplemented
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def __repr__(self) -> str:
        if self in _BUILTIN_NAMES:
            return f"GradientCheckpointingStrategy.{self.name}"
        key = ", ".join(map(repr, self._key()))
        return f"{type(self).__name__}({key})"


class _Disabled(GradientCheckpointingStrategy):
    """Every op keeps what its backward reads."""

    __slots__ = ()
    name = "Disabled"
    recipes = False

    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        return True


class _Balanced(GradientCheckpointingStrategy):
    """Memory-bound ops keep a recipe; compute-bound ones keep their values."""

    __slots__ = ()
    name = "Balanced"

    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        return not spec.memory_bound


GradientCheckpointingStrategy.Disabled = _Disabled()
GradientCheckpointingStrategy.Balanced = _Balanced()
GradientCheckpointingStrategy._builtin = (
    GradientCheckpointingStrategy.Disabled,
    GradientCheckpointingStrategy.Balanced,
)
_BUILTIN_NAMES = frozenset(GradientCheckpointingStrategy._builtin)
