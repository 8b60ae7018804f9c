"""Graph nodes. A node is kept alive only by the tensors that point to it and by its children."""

from __future__ import annotations

import itertools
from typing import Any

from .requirement import Requirement

_ids = itertools.count(1)  # next() on itertools.count is atomic under the GIL


class Node:
    """One recorded op (or a leaf). It is also the ``ctx`` that backward rules read.

    Attributes:
        id: Unique identity; gradients are keyed by it.
        spec: The ``OpSpec`` that made it, ``None`` for a leaf.
        parents: One entry per input: its node, or ``None`` for an untracked/plain input.
        inputs: Saved raw inputs (entries may be ``None`` when not saved), or ``None``.
        output: Saved raw output, or ``None``. A leaf keeps its value here.
        saved: The residuals a ``Saves.RESIDUALS`` forward returned beside its output, or
            ``None``; released after the node's backward step.
        attrs: The op's keyword attributes.
        shapes: Input shapes, for summing broadcast gradients back.
        b: The backend that computed the output.
        requirement: ``GRAD`` for a require-grad leaf, else ``GRAD_IN_BACKWARD``.
        consumed: Set once a backward has run this node's step.
        recipe: The strategy chose a recipe: no output kept; recomputed on demand
            (``ember.checkpoint.recompute``).
        fetches: Recorded by a strategy that makes recipes (``ember.checkpoint.record``): a
            tracked input it does not hold is fetched from its parent during backward.
        hooks: Gradient hooks (``Tensor.register_hook``) run on the gradient arriving here, in
            registration order, or ``None`` (``ember.autodiff.hooks``).
    """

    __slots__ = (
        "__weakref__",  # lets tests (and tools) observe node lifetime without keeping it alive
        "attrs",
        "b",
        "consumed",
        "fetches",
        "hooks",
        "id",
        "inputs",
        "output",
        "parents",
        "recipe",
        "requirement",
        "saved",
        "shapes",
        "spec",
    )

    def __init__(
        self,
        spec: Any,
        parents: tuple[Node | None, ...],
        inputs: tuple[Any, ...] | None,
        output: Any,
        attrs: dict[str, Any],
        shapes: tuple[tuple[int, ...], ...],
        b: Any,
        requirement: Requirement = Requirement.GRAD_IN_BACKWARD,
        recipe: bool = False,
        fetches: bool = False,
    ) -> None:
        self.id = next(_ids)
        self.spec = spec
        self.parents = parents
        self.inputs = inputs
        self.output = output
        self.attrs = attrs
        self.shapes = shapes
        self.b = b
        self.requirement = requirement
        self.consumed = False
        self.recipe = recipe
        self.fetches = fetches
        self.saved: Any = None
        self.hooks: list[Any] | None = None

    @classmethod
    def leaf(cls, value: Any, b: Any) -> Node:
        """A require-grad leaf holding ``value`` (kept so checkpointed children can recompute)."""
        return cls(None, (), None, value, {}, (), b, Requirement.GRAD)

    def __repr__(self) -> str:
        what = "leaf" if self.spec is None else self.spec.name
        return f"Node({what}, id={self.id}{', consumed' if self.consumed else ''})"
