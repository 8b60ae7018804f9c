"""Matrix products: compute-bound."""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Grads, Saves, defop


def _matmul_examples(rng: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    n = rng.normal
    return [
        ((n(size=(3, 4)), n(size=(4, 5))), {}),
        ((n(size=(2, 3, 4)), n(size=(4, 2))), {}),  # broadcast rhs over the batch
        ((n(size=(2, 1, 3, 4)), n(size=(3, 4, 2))), {}),  # batch dims broadcast both ways
    ]


@defop(
    "matmul",
    arity=2,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_matmul_examples,
)
def matmul_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    # the engine sums the broadcast batch dims back to each input's shape
    gx = grad @ y.mT if ctx.parents[0] is not None else None
    gy = x.mT @ grad if ctx.parents[1] is not None else None
    return gx, gy
