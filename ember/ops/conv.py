"""Convolution and pooling rows: compute-bound (their outputs are kept under ``Balanced``).

Geometry attrs are pairs ``(height, width)`` of ints; ``ember.nn.functional`` normalises PyTorch's
int-or-tuple arguments and checks shapes before the call. Bias is always an input (a zero constant
when the caller passes none) so each convolution is one row.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Precision, Saves, _need, conv_flops, defop

CB = Cost.COMPUTE_BOUND
F = Domain.FLOAT


def _conv_attrs(
    stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1
) -> dict[str, Any]:
    return {
        "stride": (stride, stride),
        "padding": (padding, padding),
        "dilation": (dilation, dilation),
        "groups": groups,
    }


def _conv2d_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 6, 5)), n(size=(4, 3, 3, 2)), n(size=(4,))), _conv_attrs()),
        ((n(size=(1, 4, 7, 7)), n(size=(6, 2, 3, 3)), n(size=(6,))), _conv_attrs(2, 1, 1, 2)),
        ((n(size=(2, 2, 8, 6)), n(size=(3, 2, 2, 3)), n(size=(3,))), _conv_attrs(1, 2, 2, 1)),
    ]


@defop(
    "conv2d",
    precision=Precision.LOW,
    arity=3,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_conv2d_examples,
    flops=conv_flops,
)
def conv2d_backward(ctx: Any, grad: Any) -> Grads:
    x, w, _ = ctx.inputs
    a = ctx.attrs
    # input grad: the column gradient grad @ W scattered back (col2im); weight grad: grad^T @ cols
    gx, gw, gb = ctx.b.conv2d_backward(
        grad,
        x,
        w,
        a["stride"],
        a["padding"],
        a["dilation"],
        a["groups"],
        _need(ctx, 0),
        _need(ctx, 1),
    )
    return gx, gw, (gb if _need(ctx, 2) else None)


def _conv_t_attrs(
    stride: int = 1, padding: int = 0, output_padding: int = 0, groups: int = 1, dilation: int = 1
) -> dict[str, Any]:
    return {
        "stride": (stride, stride),
        "padding": (padding, padding),
        "output_padding": (output_padding, output_padding),
        "groups": groups,
        "dilation": (dilation, dilation),
    }


def _conv_t_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 4, 3)), n(size=(3, 2, 3, 2)), n(size=(2,))), _conv_t_attrs()),
        ((n(size=(1, 4, 3, 3)), n(size=(4, 3, 3, 3)), n(size=(6,))), _conv_t_attrs(2, 1, 1, 2)),
        ((n(size=(1, 2, 3, 4)), n(size=(2, 2, 2, 2)), n(size=(2,))), _conv_t_attrs(1, 0, 0, 1, 2)),
    ]


@defop(
    "conv_transpose2d",
    precision=Precision.LOW,
    arity=3,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_conv_t_examples,
    flops=conv_flops,
)
def conv_transpose2d_backward(ctx: Any, grad: Any) -> Grads:
    x, w, _ = ctx.inputs
    a = ctx.attrs
    # the adjoint of conv2d: its input gradient is a conv2d of grad with the same weight
    gx, gw, gb = ctx.b.conv_transpose2d_backward(
        grad,
        x,
        w,
        a["stride"],
        a["padding"],
        a["groups"],
        a["dilation"],
        _need(ctx, 0),
        _need(ctx, 1),
    )
    return gx, gw, (gb if _need(ctx, 2) else None)


def _pool_attrs(k: int, s: int, p: int, d: int | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"kernel_size": (k, k), "stride": (s, s), "padding": (p, p)}
    if d is not None:
        attrs["dilation"] = (d, d)
    return attrs


def _max_pool_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 4, 6)),), _pool_attrs(2, 2, 0, 1)),
        ((n(size=(1, 2, 5, 5)),), _pool_attrs(3, 2, 1, 1)),
        ((n(size=(1, 1, 7, 6)),), _pool_attrs(2, 1, 0, 2)),
    ]


@defop(
    "max_pool2d",
    arity=1,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_max_pool_examples,
)
def max_pool2d_backward(ctx: Any, grad: Any) -> Grads:
    a = ctx.attrs
    # each window's gradient goes to its first maximum (found again from the saved input)
    return (
        ctx.b.max_pool2d_backward(
            grad, ctx.inputs[0], a["kernel_size"], a["stride"], a["padding"], a["dilation"]
        ),
    )


def _avg_pool_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 4, 6)),), _pool_attrs(2, 2, 0)),
        ((n(size=(1, 2, 5, 5)),), _pool_attrs(3, 2, 1)),
    ]


@defop("avg_pool2d", arity=1, cost=CB, dtypes=F, examples=_avg_pool_examples)
def avg_pool2d_backward(ctx: Any, grad: Any) -> Grads:
    a = ctx.attrs
    # each window spreads grad / (kh * kw) over its taps
    return (
        ctx.b.avg_pool2d_backward(grad, ctx.shapes[0], a["kernel_size"], a["stride"], a["padding"]),
    )


def _adaptive_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 6, 4)),), {"output_size": (3, 2)}),
        ((n(size=(1, 2, 5, 7)),), {"output_size": (3, 4)}),  # overlapping bins
    ]


@defop("adaptive_avg_pool2d", arity=1, cost=CB, dtypes=F, examples=_adaptive_examples)
def adaptive_avg_pool2d_backward(ctx: Any, grad: Any) -> Grads:
    # out = A_h x A_w^T, so grad_x = A_h^T grad A_w
    return (ctx.b.adaptive_avg_pool2d_backward(grad, ctx.shapes[0]),)
