"""Reduction rows: sums, means, extrema, var, prod, cumsum, and sort/argsort."""

from __future__ import annotations

import math
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


CB = Cost.COMPUTE_BOUND


def _var_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 4)),), {"dim": 1, "correction": 1}),
        ((rng.normal(size=(4, 3)),), {"dim": 0, "correction": 0}),
        ((rng.normal(size=(2, 3, 4)),), {"dim": 2, "correction": 1}),
    ]


@defop("var", arity=1, cost=CB, saves=Saves.INPUTS, dtypes=Domain.FLOAT, examples=_var_examples)
def var_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    (x,) = ctx.inputs
    dim = ctx.attrs["dim"]
    n = x.shape[dim]
    if n == 0:
        return (b.zeros_like(x),)
    # d/dx_i sum_j (x_j - mean)^2 / (n - c) = 2 (x_i - mean) / (n - c); the mean's terms cancel.
    # As PyTorch: n < c keeps the factor 2 / (n - c) (the forward divides by max(n - c, 0), inf)
    d = x - b.mean_dim(x, dim)
    m = n - ctx.attrs["correction"]
    if m:
        return (grad * d * (2.0 / m),)
    return (_times_inf(b, grad * d),)  # n == c: the factor is 2 / 0 (n = c = 1: every d is 0)


def _times_inf(b: Any, g: Any) -> Any:
    """``g * inf`` without floating-point warnings: +-inf by sign, NaN where ``g`` is 0 or NaN."""
    dt = b.dtype_of(g)
    inf = b.full(g.shape, math.inf, dt)
    return b.where(g > 0, inf, b.where(g < 0, -inf, b.full(g.shape, math.nan, dt)))


def _prod_examples(rng: Any) -> Examples:
    x = rng.normal(size=(3, 4))
    x[0, 1] = 0.0  # one zero in a row
    x[2, 0] = x[2, 3] = 0.0  # two zeros in a row
    return [
        ((rng.normal(size=(3, 4)),), {"dim": 1}),
        ((x,), {"dim": 1}),
        ((rng.normal(size=(2, 3, 4)),), {"dim": 0}),
    ]


def _exclusive_cumprod(b: Any, x: Any, dim: int) -> Any:
    # products of the elements before each one: (1, x0, x0 x1, ...)
    n = x.shape[dim]
    lead = (slice(None),) * dim
    ones = b.ones_like(b.index(x, (*lead, slice(0, 1))))
    return b.cat([ones, b.index(b.cumprod(x, dim), (*lead, slice(0, n - 1)))], dim)


@defop(
    "prod_dim", arity=1, cost=CB, saves=Saves.INPUTS, dtypes=Domain.NUMERIC, examples=_prod_examples
)
def prod_dim_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    (x,) = ctx.inputs
    dim = ctx.attrs["dim"]
    if x.shape[dim] == 0:
        return (b.zeros_like(x),)
    # d prod / d x_i = product of every other element = (product before i) (product after i);
    # exact when x holds zeros, where out / x would divide by zero
    before = _exclusive_cumprod(b, x, dim)
    after = b.flip(_exclusive_cumprod(b, b.flip(x, (dim,)), dim), (dim,))
    return (grad * before * after,)


def _cumsum_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 4)),), {"dim": 1}),
        ((rng.normal(size=(4, 3)),), {"dim": 0}),
        ((rng.normal(size=(2, 3, 4)),), {"dim": 2}),
    ]


@defop("cumsum", arity=1, cost=CB, dtypes=Domain.NUMERIC, examples=_cumsum_examples)
def cumsum_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    dim = ctx.attrs["dim"]
    # x_i contributes to every out_j with j >= i: a cumulative sum from the end
    return (b.flip(b.cumsum(b.flip(grad, (dim,)), dim), (dim,)),)


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
