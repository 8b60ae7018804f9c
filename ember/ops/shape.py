"""Shape rows that rearrange or mask values: flip, repeat_dim, tril, triu. Memory-bound."""

from __future__ import annotations

from typing import Any

from .registry import Cost, Examples, Grads, defop

MB = Cost.MEMORY_BOUND


def _flip_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 4)),), {"dims": (1,)}),
        ((rng.normal(size=(2, 3, 4)),), {"dims": (0, 2)}),
    ]


@defop("flip", arity=1, cost=MB, examples=_flip_examples)
def flip_backward(ctx: Any, grad: Any) -> Grads:
    # a reversal is its own inverse
    return (ctx.b.flip(grad, ctx.attrs["dims"]),)


def _repeat_dim_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(2, 3)),), {"dim": 0, "times": 3}),
        ((rng.normal(size=(2, 1, 3)),), {"dim": 1, "times": 4}),
        ((rng.normal(size=(2, 3)),), {"dim": 1, "times": 2}),
    ]


@defop("repeat_dim", arity=1, cost=MB, examples=_repeat_dim_examples)
def repeat_dim_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    shape = ctx.shapes[0]
    dim, times = ctx.attrs["dim"], ctx.attrs["times"]
    # the output holds `times` copies back to back: (.., times * n, ..) -> (.., times, n, ..)
    split = (*shape[:dim], times, shape[dim], *shape[dim + 1 :])
    return (b.reshape(b.sum_dim(b.reshape(grad, split), dim), shape),)


def _tri_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(4, 4)),), {"diagonal": 0}),
        ((rng.normal(size=(3, 5)),), {"diagonal": 1}),
        ((rng.normal(size=(2, 4, 3)),), {"diagonal": -1}),
    ]


@defop("tril", arity=1, cost=MB, examples=_tri_examples)
def tril_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.tril(grad, ctx.attrs["diagonal"]),)


@defop("triu", arity=1, cost=MB, examples=_tri_examples)
def triu_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.triu(grad, ctx.attrs["diagonal"]),)
