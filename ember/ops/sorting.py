"""Sorting rows: sort (values, differentiable) and argsort (indices). Compute-bound.

``topk`` is ``sort`` followed by a narrow, so it needs no row of its own.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, defop, nondiff


def _sort_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 5)),), {"dim": 1, "descending": False}),
        ((rng.normal(size=(4, 3)),), {"dim": 0, "descending": True}),
        ((rng.normal(size=(2, 3, 4)),), {"dim": 2, "descending": False}),
    ]


@defop(
    "sort",
    arity=1,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_sort_examples,
)
def sort_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    dim, descending = ctx.attrs["dim"], ctx.attrs["descending"]
    # out[i] = x[perm[i]] along dim: each gradient goes back to where its value came from
    perm = b.argsort(ctx.inputs[0], dim, descending)
    return (b.put_along_dim_zeros(ctx.shapes[0], perm, grad, dim),)


nondiff("argsort", 1, dtypes=Domain.NUMERIC, examples=_sort_examples)
