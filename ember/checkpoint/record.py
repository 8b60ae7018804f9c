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

    The strategy decides "keep, or recipe?"; an op with an untracked parent is kept whatever it
    answers (an untracked value can't be recomputed later). A recipe keeps no output and is
    recomputed on demand. Every node holds only the values it will read: the raw inputs from
    parents that are neither recipes nor leaves (for its backward rule, or for its recompute
    when it is a recipe), and its own output when its rule reads it and it is no recipe. A
    recipe parent's value is recomputed, a leaf's read from the leaf; a kept output that no
    child reads is not held by the graph. Declared residuals (``saved``) are always held: they
    are what the rule reads, and recomputing a recipe's output does not bring them back.
    """
    recipe = None not in parents and not strategy.keeps(spec, parents)
    inputs = None
    if recipe or spec.saves_inputs:
        inputs = tuple(
            [
                None if p is not None and (p.recipe or p.spec is None) else r
                for p, r in zip(parents, raws)
            ]
        )
    n = Node(
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
    n.saved = saved
    return n
