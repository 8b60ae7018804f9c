"""Statistics rows: var, prod_dim, cumsum. Compute-bound (their outputs are always kept).

Full reductions (``prod()``, ``max()``, ``min()``) are composites over a flattened tensor.
"""

from __future__ import annotations

import math
from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, defop

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
