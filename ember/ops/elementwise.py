"""Elementwise arithmetic and math: memory-bound rows (cheap to recompute)."""

from __future__ import annotations

import math
from typing import Any

from .registry import Cost, Domain, Examples, Grads, Precision, Saves, _need, defop, nondiff

MB = Cost.MEMORY_BOUND
F = Domain.FLOAT
N = Domain.NUMERIC
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# ---------------------------------------------------------------- examples for the test suites
# Rows with attributes or non-float inputs say what the registry-driven suites should feed them.


def _with_value(*values: float | int, lo: float = -2.0, hi: float = 2.0) -> Any:
    def examples(rng: Any) -> Examples:
        shapes = [(3, 4), (2, 1, 3), ()]
        return [
            ((rng.uniform(lo, hi, size=shapes[i % 3]),), {"value": v}) for i, v in enumerate(values)
        ]

    return examples


def _powi_examples(rng: Any) -> Examples:
    u = rng.uniform
    return [
        ((u(-2.0, 2.0, size=(3, 4)),), {"value": 2}),
        ((u(-2.0, 2.0, size=(2, 3)),), {"value": 3}),
        ((u(0.5, 2.0, size=(4,)),), {"value": -2}),
        ((u(-2.0, 2.0, size=(2, 2)),), {"value": 0}),
    ]


def _clamp_examples(rng: Any) -> Examples:
    u = rng.uniform
    return [
        ((u(-2.0, 2.0, size=(3, 4)),), {"min": -0.5, "max": 0.5}),
        ((u(-2.0, 2.0, size=(2, 3)),), {"min": None, "max": 0.3}),
        ((u(-2.0, 2.0, size=(5,)),), {"min": -0.2, "max": None}),
    ]


def _mask_where_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 4)), rng.random((3, 4)) < 0.5, n(size=(3, 4))), {}),
        ((n(size=(3, 4)), rng.random((1, 4)) < 0.5, n(size=(4,))), {}),  # mask and values broadcast
        ((n(size=(2, 1)), rng.random((2, 3)) < 0.5, n(size=(2, 3))), {}),  # x broadcasts
    ]


def _mask_fill_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 4)), rng.random((3, 4)) < 0.5), {"value": 0.5}),
        ((n(size=(3, 4)), rng.random((3, 1)) < 0.5), {"value": -2.0}),
    ]


def _cast_examples(rng: Any) -> Examples:
    from ..dtype import float32, float64, int64

    n = rng.normal
    return [
        ((n(size=(3, 4)),), {"dtype": float32, "src": float64}),
        ((n(size=(2, 3)),), {"dtype": float64, "src": float64}),
        ((rng.integers(-3, 4, size=(2, 3)),), {"dtype": float64, "src": int64}),
    ]


def _compare_examples(rng: Any) -> Examples:
    # small integers as floats, so equal values (ties) occur
    def i(*shape: int) -> Any:
        return rng.integers(-2, 3, size=shape).astype("float64")

    return [((i(3, 4), i(3, 4)), {}), ((i(2, 3, 4), i(3, 1)), {})]


def _compare_elem_examples(rng: Any) -> Examples:
    return [
        ((rng.integers(-2, 3, size=(3, 4)).astype("float64"),), {"value": 0.0}),
        ((rng.integers(-2, 3, size=(2, 3)).astype("float64"),), {"value": 1.0}),
    ]


def _logical_examples(arity: int) -> Any:
    def examples(rng: Any) -> Examples:
        shapes = [(3, 4), (1, 4)][:arity]
        return [(tuple(rng.random(s) < 0.5 for s in shapes), {})]

    return examples


# ---------------------------------------------------------------- binary
@defop("add", arity=2, cost=MB, dtypes=N, precision=Precision.FOLLOW)
def add_backward(ctx: Any, grad: Any) -> Grads:
    return grad, grad


@defop("sub", arity=2, cost=MB, dtypes=N, precision=Precision.FOLLOW)
def sub_backward(ctx: Any, grad: Any) -> Grads:
    return grad, (-grad if _need(ctx, 1) else None)


@defop("mul", arity=2, cost=MB, saves=Saves.INPUTS, dtypes=N, precision=Precision.FOLLOW)
def mul_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    # d(xy)/dx = y, d(xy)/dy = x
    return (grad * y if _need(ctx, 0) else None), (grad * x if _need(ctx, 1) else None)


@defop(
    "div",
    arity=2,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=N,
    domain=(0.5, 2.0),
    precision=Precision.FOLLOW,
)
def div_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    gx = grad / y
    # d(x/y)/dy = -x / y^2
    return gx, (-gx * x / y if _need(ctx, 1) else None)


@defop("powf", arity=2, cost=MB, saves=Saves.BOTH, dtypes=F, domain=(0.5, 2.0))
def powf_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    out = ctx.output
    # d(x^y)/dx = y x^(y-1) = y out / x;  d(x^y)/dy = out ln x
    gx = grad * y * out / x if _need(ctx, 0) else None
    gy = grad * out * ctx.b.log(x) if _need(ctx, 1) else None
    return gx, gy


# ---------------------------------------------------------------- with a scalar
@defop("add_scalar", arity=1, cost=MB, dtypes=N, examples=_with_value(1.5, -2, 0.25))
def add_scalar_backward(ctx: Any, grad: Any) -> Grads:
    return (grad,)


@defop("sub_scalar", arity=1, cost=MB, dtypes=N, examples=_with_value(1.5, -2))
def sub_scalar_backward(ctx: Any, grad: Any) -> Grads:
    return (grad,)


@defop("rsub_scalar", arity=1, cost=MB, dtypes=N, examples=_with_value(1.5, 3))
def rsub_scalar_backward(ctx: Any, grad: Any) -> Grads:
    return (-grad,)


@defop("mul_scalar", arity=1, cost=MB, dtypes=N, examples=_with_value(1.5, -3, 0.0))
def mul_scalar_backward(ctx: Any, grad: Any) -> Grads:
    return (grad * ctx.attrs["value"],)


@defop("div_scalar", arity=1, cost=MB, dtypes=N, examples=_with_value(1.5, -4))
def div_scalar_backward(ctx: Any, grad: Any) -> Grads:
    return (grad / ctx.attrs["value"],)


@defop(
    "rdiv_scalar",
    arity=1,
    cost=MB,
    saves=Saves.BOTH,
    dtypes=F,
    domain=(0.5, 2.0),
    examples=_with_value(1.5, -2.0, lo=0.5),
)
def rdiv_scalar_backward(ctx: Any, grad: Any) -> Grads:
    # d(s/x)/dx = -s/x^2 = -out/x
    return (-grad * ctx.output / ctx.inputs[0],)


@defop(
    "powf_scalar",
    arity=1,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=F,
    domain=(0.5, 2.0),
    examples=_with_value(2.0, 0.5, -1.5, 3.0, lo=0.5),
)
def powf_scalar_backward(ctx: Any, grad: Any) -> Grads:
    (x,) = ctx.inputs
    p = ctx.attrs["value"]
    if p == 2:
        return (grad * (x + x),)
    # d(x^p)/dx = p x^(p-1)
    return (grad * (p * ctx.b.powf_scalar(x, p - 1)),)


@defop("powi_scalar", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=N, examples=_powi_examples)
def powi_scalar_backward(ctx: Any, grad: Any) -> Grads:
    (x,) = ctx.inputs
    n = ctx.attrs["value"]
    if n == 0:
        return (ctx.b.zeros_like(grad),)
    if n == 2:
        return (grad * (x + x),)
    return (grad * (n * ctx.b.powi_scalar(x, n - 1)),)


@defop(
    "clamp", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=N, smooth=False, examples=_clamp_examples
)
def clamp_backward(ctx: Any, grad: Any) -> Grads:
    (x,) = ctx.inputs
    lo, hi = ctx.attrs["min"], ctx.attrs["max"]
    b = ctx.b
    # gradient passes where the input was inside [min, max]
    keep = None
    if lo is not None:
        keep = b.greater_equal(x, lo)
    if hi is not None:
        k2 = b.lower_equal(x, hi)
        keep = k2 if keep is None else b.logical_and(keep, k2)
    if keep is None:
        return (grad,)
    return (b.where(keep, grad, b.zeros_like(grad)),)


# ---------------------------------------------------------------- unary math
@defop("neg", arity=1, cost=MB, dtypes=N)
def neg_backward(ctx: Any, grad: Any) -> Grads:
    return (-grad,)


@defop("exp", arity=1, cost=MB, saves=Saves.OUTPUT, dtypes=F, domain=(-4.0, 4.0))
def exp_backward(ctx: Any, grad: Any) -> Grads:
    return (grad * ctx.output,)


@defop("log", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F, domain=(0.1, 4.0))
def log_backward(ctx: Any, grad: Any) -> Grads:
    return (grad / ctx.inputs[0],)


@defop("log1p", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F, domain=(-0.5, 4.0))
def log1p_backward(ctx: Any, grad: Any) -> Grads:
    return (grad / (ctx.inputs[0] + 1),)


@defop("sqrt", arity=1, cost=MB, saves=Saves.OUTPUT, dtypes=F, domain=(0.1, 4.0))
def sqrt_backward(ctx: Any, grad: Any) -> Grads:
    # d sqrt(x) = 1 / (2 sqrt(x))
    return (grad / (ctx.output + ctx.output),)


@defop("sin", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F)
def sin_backward(ctx: Any, grad: Any) -> Grads:
    return (grad * ctx.b.cos(ctx.inputs[0]),)


@defop("cos", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F)
def cos_backward(ctx: Any, grad: Any) -> Grads:
    return (-grad * ctx.b.sin(ctx.inputs[0]),)


@defop("tanh", arity=1, cost=MB, saves=Saves.OUTPUT, dtypes=F)
def tanh_backward(ctx: Any, grad: Any) -> Grads:
    out = ctx.output
    return (grad * (1 - out * out),)


@defop("erf", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F)
def erf_backward(ctx: Any, grad: Any) -> Grads:
    x = ctx.inputs[0]
    # d erf(x) = 2/sqrt(pi) exp(-x^2)
    return (grad * (_TWO_OVER_SQRT_PI * ctx.b.exp(-(x * x))),)


@defop("abs", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=N, smooth=False)
def abs_backward(ctx: Any, grad: Any) -> Grads:
    return (grad * ctx.b.sign(ctx.inputs[0]),)


@defop("recip", arity=1, cost=MB, saves=Saves.OUTPUT, dtypes=F, domain=(0.5, 2.0))
def recip_backward(ctx: Any, grad: Any) -> Grads:
    out = ctx.output
    return (-grad * out * out,)


@defop("sign", arity=1, cost=MB, dtypes=N, smooth=False)
def sign_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.zeros_like(grad),)


# ---------------------------------------------------------------- masks and casts
@defop(
    "mask_where",
    arity=3,
    cost=MB,
    saves=Saves.INPUTS,
    forward=lambda b, x, mask, values: b.where(mask, values, x),
    examples=_mask_where_examples,
)
def mask_where_backward(ctx: Any, grad: Any) -> Grads:
    _, mask, _ = ctx.inputs
    b = ctx.b
    zero = b.zeros_like(grad)
    # the output took values where mask, else x
    gx = b.where(mask, zero, grad) if _need(ctx, 0) else None
    gv = b.where(mask, grad, zero) if _need(ctx, 2) else None
    return gx, None, gv


@defop(
    "mask_fill",
    arity=2,
    cost=MB,
    saves=Saves.INPUTS,
    forward=lambda b, x, mask, value: b.where(mask, b.scalar(value, x), x),
    examples=_mask_fill_examples,
)
def mask_fill_backward(ctx: Any, grad: Any) -> Grads:
    _, mask = ctx.inputs
    b = ctx.b
    return b.where(mask, b.zeros_like(grad), grad), None


@defop(
    "cast",
    arity=1,
    cost=Cost.MEMORY_BOUND,
    forward=lambda b, x, dtype, src: b.cast(x, dtype),
    examples=_cast_examples,
)
def cast_backward(ctx: Any, grad: Any) -> Grads:
    # attrs: dtype (target), src (the input's dtype, which the gradient returns to)
    return (ctx.b.cast(grad, ctx.attrs["src"]),)


# ---------------------------------------------------------------- comparisons (no gradient)
for _name in ("equal", "not_equal", "greater", "greater_equal", "lower", "lower_equal"):
    nondiff(_name, 2, examples=_compare_examples)
    nondiff(
        f"{_name}_elem",
        1,
        forward=lambda b, x, value, _n=_name: getattr(b, _n)(x, value),
        examples=_compare_elem_examples,
    )
nondiff("logical_not", 1, examples=_logical_examples(1))
nondiff("logical_and", 2, examples=_logical_examples(2))
nondiff("logical_or", 2, examples=_logical_examples(2))


def _zero_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.zeros_like(grad),)


for _name in ("floor", "ceil", "round"):
    # smooth=False: finite differences straddling an integer step would see a jump
    defop(_name, arity=1, cost=Cost.MEMORY_BOUND, dtypes=Domain.FLOAT, smooth=False)(_zero_backward)
