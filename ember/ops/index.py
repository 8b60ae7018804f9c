"""Indexing rows: select, gather, scatter (add) and slice_assign.

Index inputs are int arrays (no gradient; their ``parents`` entry is always ``None``), already
checked to lie in range. ``select`` and ``slice_assign`` only move values (memory-bound);
``gather`` and ``scatter`` are compute-bound (SEMANTICS.md §7).
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Examples, Grads, Saves, _need, defop


def _zeros(ctx: Any, shape: tuple[int, ...], like: Any) -> Any:
    b = ctx.b
    return b.full(shape, 0, b.dtype_of(like))


def _select_examples(rng: Any) -> Examples:
    i64 = "int64"
    return [
        ((rng.normal(size=(4, 3)), rng.integers(0, 4, size=5).astype(i64)), {"dim": 0}),
        ((rng.normal(size=(2, 5, 3)), rng.integers(0, 5, size=3).astype(i64)), {"dim": 1}),
        ((rng.normal(size=(3, 4)), rng.integers(0, 4, size=0).astype(i64)), {"dim": 1}),
    ]


@defop("select", arity=2, cost=Cost.MEMORY_BOUND, saves=Saves.INPUTS, examples=_select_examples)
def select_backward(ctx: Any, grad: Any) -> Grads:
    _, indices = ctx.inputs
    # each output slice came from input slice indices[i]; repeated indices add up
    zeros = _zeros(ctx, ctx.shapes[0], grad)
    return ctx.b.select_add(zeros, indices, grad, ctx.attrs["dim"]), None


def _gather_examples(rng: Any) -> Examples:
    i64 = "int64"
    return [
        ((rng.normal(size=(3, 4)), rng.integers(0, 4, size=(3, 6)).astype(i64)), {"dim": 1}),
        ((rng.normal(size=(4, 3)), rng.integers(0, 4, size=(2, 3)).astype(i64)), {"dim": 0}),
        ((rng.normal(size=(2, 3, 4)), rng.integers(0, 3, size=(2, 2, 3)).astype(i64)), {"dim": 1}),
    ]


@defop("gather", arity=2, cost=Cost.COMPUTE_BOUND, saves=Saves.INPUTS, examples=_gather_examples)
def gather_backward(ctx: Any, grad: Any) -> Grads:
    _, indices = ctx.inputs
    # out[i] = x[indices[i]] along dim, so x receives the scatter-add of the gradient
    zeros = _zeros(ctx, ctx.shapes[0], grad)
    return ctx.b.scatter_add(zeros, indices, grad, ctx.attrs["dim"]), None


def _scatter_examples(rng: Any) -> Examples:
    i64 = "int64"
    n = rng.normal
    return [
        ((n(size=(3, 4)), rng.integers(0, 4, size=(3, 2)).astype(i64), n(size=(3, 2))), {"dim": 1}),
        ((n(size=(4, 3)), rng.integers(0, 4, size=(5, 3)).astype(i64), n(size=(5, 3))), {"dim": 0}),
        (
            (n(size=(2, 3, 4)), rng.integers(0, 3, size=(2, 2, 4)).astype(i64), n(size=(2, 2, 4))),
            {"dim": 1},
        ),
    ]


@defop(
    "scatter",
    arity=3,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    forward=lambda b, x, indices, values, dim: b.scatter_add(x, indices, values, dim),
    examples=_scatter_examples,
)
def scatter_backward(ctx: Any, grad: Any) -> Grads:
    _, indices, _ = ctx.inputs
    # out = x + (values added at indices): x passes the gradient, values read it back
    gv = ctx.b.gather(grad, indices, ctx.attrs["dim"]) if _need(ctx, 2) else None
    return grad, None, gv


def _slice_assign_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(4, 5)), n(size=(2, 3))), {"key": (slice(1, 3), slice(0, 3))}),
        ((n(size=(3, 4)), n(size=(3, 2))), {"key": (slice(None), slice(0, 4, 2))}),
        ((n(size=(2, 3, 4)), n(size=(4,))), {"key": (1, slice(0, 2))}),  # values broadcast
    ]


@defop(
    "slice_assign",
    arity=2,
    cost=Cost.MEMORY_BOUND,
    examples=_slice_assign_examples,
)
def slice_assign_backward(ctx: Any, grad: Any) -> Grads:
    key = ctx.attrs["key"]
    b = ctx.b
    # the region's old values were overwritten: x gets the gradient outside it, values inside
    gx = b.slice_assign(grad, _zeros(ctx, (), grad), key) if _need(ctx, 0) else None
    gv = b.index(grad, key) if _need(ctx, 1) else None
    return gx, gv
