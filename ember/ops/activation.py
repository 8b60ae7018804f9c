"""Activation rows: relu, gelu, silu, sigmoid. Memory-bound (cheap to recompute under Balanced)."""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, defop

MB = Cost.MEMORY_BOUND
F = Domain.FLOAT


def _relu_examples(rng: Any) -> Examples:
    # keep values away from the kink at 0, where finite differences don't apply
    x = rng.uniform(0.1, 2.0, size=(3, 4)) * rng.choice([-1.0, 1.0], size=(3, 4))
    return [((x,), {}), ((rng.uniform(0.1, 1.0, size=(5,)),), {})]


@defop("relu", arity=1, cost=MB, saves=Saves.OUTPUT, dtypes=F, examples=_relu_examples)
def relu_backward(ctx: Any, grad: Any) -> Grads:
    # d relu = 1 where the output is positive, else 0
    return (ctx.b.relu_backward(grad, ctx.output),)


def _gelu_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 4)),), {"approximate": "none"}),
        ((rng.normal(size=(2, 3, 2)) * 2,), {"approximate": "tanh"}),
    ]


@defop("gelu", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F, examples=_gelu_examples)
def gelu_backward(ctx: Any, grad: Any) -> Grads:
    # exact: Phi(x) + x phi(x); tanh form: its derivative, computed by the backend
    return (ctx.b.gelu_backward(grad, ctx.inputs[0], ctx.attrs["approximate"]),)


@defop("silu", arity=1, cost=MB, saves=Saves.INPUTS, dtypes=F, domain=(-4.0, 4.0))
def silu_backward(ctx: Any, grad: Any) -> Grads:
    # d x sigmoid(x) = s (1 + x (1 - s))
    return (ctx.b.silu_backward(grad, ctx.inputs[0]),)


@defop("sigmoid", arity=1, cost=MB, saves=Saves.OUTPUT, dtypes=F, domain=(-4.0, 4.0))
def sigmoid_backward(ctx: Any, grad: Any) -> Grads:
    out = ctx.output
    # d sigmoid = s (1 - s)
    return (grad * (out * (1 - out)),)
