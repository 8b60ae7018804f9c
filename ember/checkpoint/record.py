"""The record side of checkpointing: what a node holds under a strategy that makes recipes.

``tensor/dispatch._record`` calls ``node`` for every autodiff result whose strategy has
``recipes`` set (``Disabled`` never gets here: its nodes hold what the row's ``saves`` names).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..autodiff.node import Node

if TYPE_CHECKING:
    from ..ops.registry import OpSpec
    from .strategy import GradientCheckpointingStrategy

_shape_of = attrgetter("shape")


MAX_CHAIN = 8  # recipes in a row along one recompute path before an output is kept


class ChainNode(Node):
    """A node recorded by a recipe strategy: ``depth`` is the length of the recompute chain
    behind it (0 when its value is kept, else 1 + its deepest recipe parent's)."""

    __slots__ = ("depth",)
    depth: int


def _depth(parents: tuple[Node | None, ...]) -> int:
    d = 0
    for p in parents:
        if p is not None and p.recipe:
            pd: int = p.depth  # type: ignore[attr-defined]  # a recipe is a ChainNode
            if pd > d:
                d = pd
    return d + 1


def _promote(parents: tuple[Node | None, ...], raws: tuple[Any, ...], out: Any) -> bool:
    """Keep the deepest recipe parent's value instead of ``out`` when it is no larger: the chain
    restarts there, so that parent's other children (a residual stream's next block) start
    short too, and a branch's tail (a norm and its cast) is not kept beside it. The parent's
    children recorded before fetch the value from its ``output``; a parent whose rule does not
    read its inputs drops the ones it held for its recompute. ``False``: nothing promoted."""
    deepest: ChainNode | None = None
    raw = None
    for p, r in zip(parents, raws):
        if type(p) is ChainNode and p.recipe and (deepest is None or p.depth > deepest.depth):
            deepest, raw = p, r
    if deepest is None or getattr(raw, "nbytes", 0) > getattr(out, "nbytes", 0):
        return False
    deepest.recipe = False
    deepest.depth = 0
    deepest.output = raw
    if not deepest.spec.saves_inputs:
        deepest.inputs = None
    return True


def node(
    strategy: GradientCheckpointingStrategy,
    spec: OpSpec,
    parents: tuple[Node | None, ...],
    raws: tuple[Any, ...],
    out: Any,
    attrs: dict[str, Any],
    b: Any,
    saved: Any = None,
) -> Node:
    """The node of ``spec``'s result ``out`` (from ``raws``; ``parents`` their nodes).

    The strategy decides "keep, or recipe?". An op with an untracked parent is kept whatever it
    answers (an untracked value can't be recomputed later), unless its rule reads its inputs:
    then the node holds the untracked values anyway (dropout's multiply holds its mask) and a
    recipe costs nothing more. Where a recipe's recompute chain would pass ``MAX_CHAIN``
    recipes in a row, its deepest recipe parent's value is kept instead when it is no larger
    (the chain restarts at that parent: on a residual stream the stream is kept, not the norm
    branching off it), else the node's own; so a long run of memory-bound ops keeps a value
    every few ops and backward never holds a whole chain's recomputed values at once.
    Every node holds only the values it will read: the raw inputs from parents that are neither
    recipes nor leaves (for its backward rule, or for its recompute when it is a recipe), and
    its own output when its rule reads it and it is no recipe. A recipe parent's value is
    recomputed, a leaf's read from the leaf; a kept output that no child reads is not held by the
    graph. Declared residuals (``saved``) are always held: they are what the rule reads, and
    recomputing a recipe's output does not bring them back. A budget strategy's nodes are
    recorded by ``budget.record``.
    """
    if strategy.budgeted:
        return _budget.record(strategy, spec, parents, raws, out, attrs, b, saved)
    recipe = (
        (spec.saves_inputs or None not in parents)
        and not spec.random  # a recompute would draw again: random outputs are kept
        and not strategy.keeps(spec, parents)
    )
    depth = 0
    if recipe:
        depth = _depth(parents)
        if depth > MAX_CHAIN and _promote(parents, raws, out):
            depth = _depth(parents)
        if depth > MAX_CHAIN:
            recipe = False
            depth = 0
    inputs = None
    if recipe or spec.saves_inputs:
        inputs = tuple(
            [
                None if p is not None and (p.recipe or p.spec is None) else r
                for p, r in zip(parents, raws)
            ]
        )
    n = ChainNode(
        spec,
        parents,
        inputs,
        out if spec.saves_output and not recipe else None,
        attrs,
        tuple(map(_shape_of, raws)),
        b,
        recipe=recipe,
        fetches=True,
    )
    n.depth = depth
    n.saved = saved
    return n


from . import budget as _budget  # noqa: E402  (budget.py builds on ChainNode)
