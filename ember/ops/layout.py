"""Layout rows: reshape, permute, expand, basic indexing (``index``), cat/stack, device moves,
flip, repeat_dim and the triangles.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Examples, Grads, defop
from .slicegrad import SliceGrad

MB = Cost.MEMORY_BOUND


def _reshape_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 4)),), {"shape": (2, 6)}),
        ((rng.normal(size=(2, 3, 2)),), {"shape": (12,)}),
    ]


@defop("reshape", arity=1, cost=MB, examples=_reshape_examples)
def reshape_backward(ctx: Any, grad: Any) -> Grads:
    return (ctx.b.reshape(grad, ctx.shapes[0]),)


def _permute_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(2, 3, 4)),), {"dims": (2, 0, 1)}),
        ((rng.normal(size=(3, 4)),), {"dims": (1, 0)}),
    ]


@defop("permute", arity=1, cost=MB, examples=_permute_examples)
def permute_backward(ctx: Any, grad: Any) -> Grads:
    dims = ctx.attrs["dims"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return (ctx.b.permute(grad, inverse),)


def _expand_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 1)),), {"shape": (2, 3, 4)}),
        ((rng.normal(size=(4,)),), {"shape": (3, 4)}),
    ]


@defop("expand", arity=1, cost=MB, examples=_expand_examples)
def expand_backward(ctx: Any, grad: Any) -> Grads:
    return (grad,)  # the engine sums it back to the input's shape


def _index_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(4, 5)),), {"key": (slice(1, 3), 2)}),
        ((rng.normal(size=(2, 3, 4)),), {"key": (Ellipsis, slice(None, None, 2))}),
        ((rng.normal(size=(3, 4)),), {"key": (None, slice(0, 2), slice(None))}),
    ]


@defop("index", arity=1, cost=MB, examples=_index_examples)
def index_backward(ctx: Any, grad: Any) -> Grads:
    key = ctx.attrs["key"]
    d = _narrow_dim(key)
    if d >= 0:
        # a narrow (a split / chunk piece): the engine joins sibling pieces with one cat
        return (SliceGrad(ctx.b, ctx.shapes[0], d, key[d].start, grad),)
    return (ctx.b.index_put_zeros(ctx.shapes[0], key, grad),)


def _narrow_dim(key: Any) -> int:
    """The dim of a narrow key ``(:, ..., :, start:stop)`` with 0 <= start <= stop, else -1."""
    last = len(key) - 1
    for i, k in enumerate(key):
        if type(k) is not slice or k.step is not None:
            return -1
        if i < last and (k.start is not None or k.stop is not None):
            return -1
    k = key[last] if key else None
    if k is None or type(k.start) is not int or type(k.stop) is not int:
        return -1
    return last if 0 <= k.start <= k.stop else -1


def _cat_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3)), n(size=(2, 1)), n(size=(2, 2))), {"dim": 1}),
        ((n(size=(1, 3)), n(size=(2, 3))), {"dim": 0}),
    ]


@defop("cat", arity=-1, cost=MB, examples=_cat_examples)
def cat_backward(ctx: Any, grad: Any) -> Grads:
    dim = ctx.attrs["dim"]
    sizes = [s[dim] for s in ctx.shapes]
    return tuple(ctx.b.split_sizes(grad, sizes, dim))


def _stack_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3)), n(size=(2, 3))), {"dim": 0}),
        ((n(size=(2, 3)), n(size=(2, 3)), n(size=(2, 3))), {"dim": 2}),
    ]


@defop("stack", arity=-1, cost=MB, examples=_stack_examples)
def stack_backward(ctx: Any, grad: Any) -> Grads:
    dim = ctx.attrs["dim"]
    lead = (slice(None),) * dim
    return tuple(ctx.b.index(grad, (*lead, i)) for i in range(len(ctx.shapes)))


@defop(
    "to_device",
    arity=1,
    cost=Cost.COMPUTE_BOUND,
    forward=lambda b, x, src, dst: dst.receive(x, src),
)
def to_device_backward(ctx: Any, grad: Any) -> Grads:
    # the gradient travels back to the source device
    src, dst = ctx.attrs["src"], ctx.attrs["dst"]
    return (src.receive(grad, dst),)


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
