"""Rounding rows: floor, ceil, round. Piecewise constant, so their gradient is zero."""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Grads, defop


def _zero_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.zeros_like(grad),)


for _name in ("floor", "ceil", "round"):
    # smooth=False: finite differences straddling an integer step would see a jump
    defop(_name, arity=1, cost=Cost.MEMORY_BOUND, dtypes=Domain.FLOAT, smooth=False)(_zero_backward)
