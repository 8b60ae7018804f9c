"""Gradient checkpointing strategies (SEMANTICS.md §7): the protocol and the built-in three.

A strategy answers one question per recorded op: does the node keep the values its backward
reads, or only a recipe (its row and its parents) to recompute them from during backward?
``GradientCheckpointingStrategy`` is the protocol; ``Disabled`` and ``Balanced`` are instances of
its built-in subclasses, held as class attributes, and ``budget(bytes=, fraction=)`` makes a
memory budget (``budget.py`` holds its record side). A new strategy is one subclass.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..autodiff.node import Node
    from ..ops.registry import OpSpec

from ..errors import AutodiffError


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
    ``budget(bytes=..., fraction=...)``: values are kept until the graph's saved bytes would pass
    the budget, then the held values cheapest to recompute per byte freed are dropped.

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
    budgeted: ClassVar[bool] = False  # True: the record side is ``budget.record`` (a budget)

    @staticmethod
    def budget(
        bytes: int | None = None, fraction: float | None = None
    ) -> GradientCheckpointingStrategy:
        """A memory budget for the saved values of each graph: exactly one of ``bytes`` (an int)
        or ``fraction`` (0 < f <= 1, of the ``Disabled`` peak of the same graph, measured on its
        first step and reused for later steps of the same shapes). Any value with a recipe,
        compute-bound too, may be dropped to stay under it (SEMANTICS.md §7)."""
        return _Budget(bytes, fraction)

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


class _Budget(GradientCheckpointingStrategy):
    """Keep values until the graph's saved bytes would pass a budget, then drop the cheapest to
    recompute per byte freed (``budget.py``)."""

    __slots__ = ("bytes", "fraction")
    name = "Budget"
    budgeted = True

    def __init__(self, bytes: int | None = None, fraction: float | None = None) -> None:
        if (bytes is None) == (fraction is None):
            raise AutodiffError(
                "GradientCheckpointingStrategy.budget: expected exactly one of bytes= or "
                f"fraction=, got bytes={bytes!r}, fraction={fraction!r}. Hint: budget(fraction=0.4)"
                " (of the Disabled peak) or budget(bytes=2**30)."
            )
        if bytes is not None and (type(bytes) is bool or not isinstance(bytes, int) or bytes <= 0):
            raise AutodiffError(
                f"GradientCheckpointingStrategy.budget: expected bytes to be a positive int, got "
                f"{bytes!r}. Hint: budget(bytes=512 * 2**20) for 512 MiB."
            )
        if fraction is not None:
            ok = isinstance(fraction, (int, float)) and type(fraction) is not bool
            if not ok or not 0.0 < float(fraction) <= 1.0:
                raise AutodiffError(
                    "GradientCheckpointingStrategy.budget: expected fraction in (0, 1] (of the "
                    f"Disabled peak), got {fraction!r}. Hint: budget(fraction=0.5)."
                )
            fraction = float(fraction)
        self.bytes = bytes
        self.fraction = fraction

    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        return True  # the record side is budget.record; nothing is dropped before the budget

    def _key(self) -> tuple[Any, ...]:
        return (self.bytes, self.fraction)

    def __repr__(self) -> str:
        if self.bytes is not None:
            return f"GradientCheckpointingStrategy.budget(bytes={self.bytes})"
        return f"GradientCheckpointingStrategy.budget(fraction={self.fraction})"


GradientCheckpointingStrategy.Disabled = _Disabled()
GradientCheckpointingStrategy.Balanced = _Balanced()
GradientCheckpointingStrategy._builtin = (
    GradientCheckpointingStrategy.Disabled,
    GradientCheckpointingStrategy.Balanced,
)
_BUILTIN_NAMES = frozenset(GradientCheckpointingStrategy._builtin)
