"""Rows for backend calls that backward rules make: each is a differentiable row itself, so a rule
recorded under ``backward(create_graph=True)`` (``ember.autodiff.rule_backend``) is built from rows
only and can be differentiated again, to any order.

- ``softplus``: ``log(1 + exp(x))``, which the logits form of binary cross-entropy reads.
- ``matrix_transpose``: the ``.mT`` of an array in a rule (a view; its gradient is made
  contiguous).
- ``conv2d_input_grad`` / ``conv2d_weight_grad``: the two halves of ``conv2d``'s backward kernel
  (``b.conv2d_backward``). Each is bilinear in its inputs, so its own backward is a ``conv2d``
  and the other half (``conv_transpose2d``'s backward is built from the same two).
- ``avg_pool2d_backward`` / ``adaptive_avg_pool2d_backward``: linear in the gradient; their
  backward is the pooling forward (the adjoint of an adjoint).

Compute-bound, like the rows whose backward they are.
"""

from __future__ import annotations

from typing import Any

from .conv import pool_output_size
from .registry import Cost, Domain, Examples, Grads, Saves, _need, defop

CB = Cost.COMPUTE_BOUND
F = Domain.FLOAT
Pair = tuple[int, int]


@defop("softplus", arity=1, cost=Cost.MEMORY_BOUND, saves=Saves.INPUTS, dtypes=F)
def softplus_backward(ctx: Any, grad: Any) -> Grads:
    # d log(1 + e^x) = sigmoid(x)
    return (grad * ctx.b.sigmoid(ctx.inputs[0]),)


# ---------------------------------------------------------------- the .mT rules spell
def _last_two(ndim: int) -> tuple[int, ...]:
    return (*range(ndim - 2), ndim - 1, ndim - 2)


def _mT_examples(rng: Any) -> Examples:
    return [((rng.normal(size=(3, 4)),), {}), ((rng.normal(size=(2, 3, 4)),), {})]


@defop(
    "matrix_transpose",
    arity=1,
    cost=Cost.MEMORY_BOUND,
    forward=lambda b, x: b.permute(x, _last_two(x.ndim)),
    examples=_mT_examples,
)
def matrix_transpose_backward(ctx: Any, grad: Any) -> Grads:
    # the last two dims swapped back, as a contiguous array: the gradient of a rule's
    # ``w.mT @ g`` feeds elementwise rows, which a transposed view would slow down several times
    b = ctx.b
    return (b.copy(b.permute(grad, _last_two(len(ctx.shapes[0])))),)


# ---------------------------------------------------------------- conv2d's backward, as rows
def _out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _conv_cases(rng: Any) -> list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]]:
    """(x shape, weight shape, conv attrs) of the conv2d row's own geometries."""

    def attrs(s: int, p: int, d: int, g: int) -> dict[str, Any]:
        return {"stride": (s, s), "padding": (p, p), "dilation": (d, d), "groups": g}

    return [
        ((2, 3, 6, 5), (4, 3, 3, 2), attrs(1, 0, 1, 1)),
        ((1, 4, 7, 7), (6, 2, 3, 3), attrs(2, 1, 1, 2)),
        ((2, 2, 8, 6), (3, 2, 2, 3), attrs(1, 2, 2, 1)),
    ]


def _grad_shape(x: tuple[int, ...], w: tuple[int, ...], a: dict[str, Any]) -> tuple[int, ...]:
    s, p, d = a["stride"], a["padding"], a["dilation"]
    oh = _out_size(x[2], w[2], s[0], p[0], d[0])
    ow = _out_size(x[3], w[3], s[1], p[1], d[1])
    return (x[0], w[0], oh, ow)


def _input_grad_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=_grad_shape(x, w, a)), n(size=w)), {"input_shape": x, **a})
        for x, w, a in _conv_cases(rng)
    ]


def _weight_grad_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=_grad_shape(x, w, a)), n(size=x)), {"weight_shape": w, **a})
        for x, w, a in _conv_cases(rng)
    ]


def _input_grad(
    b: Any,
    grad: Any,
    weight: Any,
    input_shape: tuple[int, ...],
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> Any:
    x = b.full(input_shape, 0, b.dtype_of(grad))  # only its shape is read
    return b.conv2d_backward(
        grad, x, weight, stride, padding, dilation, groups, True, False, False
    )[0]


def _weight_grad(
    b: Any,
    grad: Any,
    x: Any,
    weight_shape: tuple[int, ...],
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> Any:
    w = b.full(weight_shape, 0, b.dtype_of(grad))  # only its shape is read
    return b.conv2d_backward(grad, x, w, stride, padding, dilation, groups, False, True, False)[1]


def _conv(b: Any, x: Any, w: Any, a: dict[str, Any]) -> Any:
    zero = b.full((w.shape[0],), 0, b.dtype_of(w))
    return b.conv2d(x, w, zero, a["stride"], a["padding"], a["dilation"], a["groups"])


@defop(
    "conv2d_input_grad",
    arity=2,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    forward=_input_grad,
    examples=_input_grad_examples,
)
def conv2d_input_grad_backward(ctx: Any, grad: Any) -> Grads:
    g, w = ctx.inputs
    a = ctx.attrs
    b = ctx.b
    # gx = C_w^T g is bilinear in (g, w): <G, gx> = <C_w G, g>, C_w the convolution by w
    gg = _conv(b, grad, w, a) if _need(ctx, 0) else None
    gw = None
    if _need(ctx, 1):
        s, p, d, groups = a["stride"], a["padding"], a["dilation"], a["groups"]
        gw = b.conv2d_backward(g, grad, w, s, p, d, groups, False, True, False)[1]
    return gg, gw


@defop(
    "conv2d_weight_grad",
    arity=2,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    forward=_weight_grad,
    examples=_weight_grad_examples,
)
def conv2d_weight_grad_backward(ctx: Any, grad: Any) -> Grads:
    g, x = ctx.inputs
    a = ctx.attrs
    b = ctx.b
    # gw is bilinear in (g, x): <W, gw> = <C_W x, g>
    gg = _conv(b, x, grad, a) if _need(ctx, 0) else None
    gx = None
    if _need(ctx, 1):
        s, p, d, groups = a["stride"], a["padding"], a["dilation"], a["groups"]
        gx = b.conv2d_backward(g, x, grad, s, p, d, groups, True, False, False)[0]
    return gg, gx


# ---------------------------------------------------------------- pooling backwards, as rows
def _avg_back_examples(rng: Any) -> Examples:
    n = rng.normal

    def case(x: tuple[int, ...], k: int, s: int, p: int, **extra: Any) -> Any:
        ceil = extra.get("ceil_mode", False)
        oh, ow = (pool_output_size(x[i], k, s, p, 1, ceil) for i in (2, 3))
        attrs = {"input_shape": x, "kernel_size": (k, k), "stride": (s, s), "padding": (p, p)}
        return ((n(size=(x[0], x[1], oh, ow)),), {**attrs, **extra})

    return [
        case((2, 3, 4, 6), 2, 2, 0),
        case((1, 2, 5, 5), 3, 2, 1),
        case((2, 2, 5, 7), 2, 2, 0, ceil_mode=True),
        case((1, 2, 6, 5), 3, 2, 1, ceil_mode=True, count_include_pad=False),
        case((1, 1, 5, 6), 3, 2, 1, ceil_mode=True, divisor_override=4),
    ]


@defop("avg_pool2d_backward", arity=1, cost=CB, dtypes=F, examples=_avg_back_examples)
def avg_pool2d_backward_backward(ctx: Any, grad: Any) -> Grads:
    a = {k: v for k, v in ctx.attrs.items() if k != "input_shape"}
    # linear in the gradient: its adjoint is the pooling itself (same windows and divisors)
    return (ctx.b.avg_pool2d(grad, **a),)


def _adaptive_back_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 3, 2)),), {"input_shape": (2, 3, 6, 4)}),
        ((n(size=(1, 2, 3, 4)),), {"input_shape": (1, 2, 5, 7)}),  # overlapping bins
    ]


@defop(
    "adaptive_avg_pool2d_backward",
    arity=1,
    cost=CB,
    dtypes=F,
    examples=_adaptive_back_examples,
)
def adaptive_avg_pool2d_backward_backward(ctx: Any, grad: Any) -> Grads:
    # linear in the gradient: its adjoint is the pooling to the gradient's size
    out = ctx.shapes[0][2:]
    return (ctx.b.adaptive_avg_pool2d(grad, (out[0], out[1])),)
