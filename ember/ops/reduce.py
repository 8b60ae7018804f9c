"""Reductions: compute-bound rows (their outputs are kept under every strategy)."""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, defop, nondiff

CB = Cost.COMPUTE_BOUND


def _dim_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 4)),), {"dim": 1}),
        ((rng.normal(size=(2, 3, 4)),), {"dim": 0}),
        ((rng.normal(size=(2, 3, 4)),), {"dim": 2}),
    ]


@defop("sum", arity=1, cost=CB, dtypes=Domain.NUMERIC)
def sum_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.expand(grad, ctx.shapes[0]),)


@defop("sum_dim", arity=1, cost=CB, dtypes=Domain.NUMERIC, examples=_dim_examples)
def sum_dim_backward(ctx: Any, grad: Any) -> Grads:
    # the kept size-1 dim broadcasts back over the input
    return (ctx.b.expand(grad, ctx.shapes[0]),)


@defop("mean", arity=1, cost=CB, dtypes=Domain.FLOAT)
def mean_backward(ctx: Any, grad: Any) -> Grads:
    shape = ctx.shapes[0]
    n = 1
    for s in shape:
        n *= s
    return (ctx.b.expand(grad / max(n, 1), shape),)


@defop("mean_dim", arity=1, cost=CB, dtypes=Domain.FLOAT, examples=_dim_examples)
def mean_dim_backward(ctx: Any, grad: Any) -> Grads:
    shape = ctx.shapes[0]
    return (ctx.b.expand(grad / max(shape[ctx.attrs["dim"]], 1), shape),)


def _extremum_backward(ctx: Any, grad: Any, arg: str) -> Grads:
    b = ctx.b
    dim = ctx.attrs["dim"]
    idx = getattr(b, arg)(ctx.inputs[0], dim)
    # the gradient goes to the (first) element that was selected
    return (b.put_along_dim_zeros(ctx.shapes[0], idx, grad, dim),)


@defop(
    "max_dim",
    arity=1,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_dim_examples,
)
def max_dim_backward(ctx: Any, grad: Any) -> Grads:
    return _extremum_backward(ctx, grad, "argmax")


@defop(
    "min_dim",
    arity=1,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_dim_examples,
)
def min_dim_backward(ctx: Any, grad: Any) -> Grads:
    return _extremum_backward(ctx, grad, "argmin")


nondiff("argmax", 1, dtypes=Domain.NUMERIC, examples=_dim_examples)
nondiff("argmin", 1, dtypes=Domain.NUMERIC, examples=_dim_examples)
