"""Convolution and pooling rows: compute-bound (their outputs are kept under ``Balanced``).

Geometry attrs are pairs ``(height, width)`` of ints; ``ember.nn.functional`` normalises PyTorch's
int-or-tuple arguments and checks shapes before the call. Bias is always an input (a zero constant
when the caller passes none) so each convolution is one row.
"""

from __future__ import annotations

from typing import Any

from .registry import (
    Cost,
    Domain,
    Examples,
    Grads,
    OpSpec,
    Precision,
    Saves,
    _need,
    conv_flops,
    defop,
    register,
)

CB = Cost.COMPUTE_BOUND
F = Domain.FLOAT
Pair = tuple[int, int]


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
        _need(ctx, 2),
    )
    return gx, gw, gb


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
        _need(ctx, 2),
    )
    return gx, gw, gb


def pool_output_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """Windows of a pooling along an axis of size ``n`` (PyTorch's rule; < 1 when none fits):
    ceil mode rounds up, but the last window must start inside the input or its left
    padding."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n + p else out


def _pool_attrs(k: int, s: int, p: int, d: int | None = None, **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"kernel_size": (k, k), "stride": (s, s), "padding": (p, p)}
    if d is not None:
        attrs["dilation"] = (d, d)
    return {**attrs, **extra}


def _max_pool_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 4, 6)),), _pool_attrs(2, 2, 0, 1)),
        ((n(size=(1, 2, 5, 5)),), _pool_attrs(3, 2, 1, 1)),
        ((n(size=(1, 1, 7, 6)),), _pool_attrs(2, 1, 0, 2)),
        # ceil mode: a last, partial window on both axes (5 -> 3 of stride 2), and with padding
        ((n(size=(2, 2, 5, 7)),), _pool_attrs(2, 2, 0, 1, ceil_mode=True)),
        ((n(size=(1, 2, 6, 5)),), _pool_attrs(3, 2, 1, 1, ceil_mode=True)),
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
    # each window's gradient goes to its first maximum (found again from the saved input)
    return (ctx.b.max_pool2d_backward(grad, ctx.inputs[0], **ctx.attrs),)


# where each window's maximum is, as PyTorch's return_indices=True: a flat index into the
# (H, W) plane of its (n, c), int64, no gradient
register(OpSpec("max_pool2d_indices", 1, None, CB, Saves.NONE, None, None, F, _max_pool_examples))


def _avg_pool_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(2, 3, 4, 6)),), _pool_attrs(2, 2, 0)),
        ((n(size=(1, 2, 5, 5)),), _pool_attrs(3, 2, 1)),
        ((n(size=(1, 2, 5, 5)),), _pool_attrs(3, 2, 1, count_include_pad=False)),
        ((n(size=(2, 2, 5, 7)),), _pool_attrs(2, 2, 0, ceil_mode=True)),
        ((n(size=(1, 2, 6, 5)),), _pool_attrs(3, 2, 1, ceil_mode=True, count_include_pad=False)),
        ((n(size=(1, 1, 5, 6)),), _pool_attrs(3, 2, 1, ceil_mode=True, divisor_override=4)),
    ]


@defop("avg_pool2d", arity=1, cost=CB, dtypes=F, examples=_avg_pool_examples)
def avg_pool2d_backward(ctx: Any, grad: Any) -> Grads:
    a = ctx.attrs
    # each window spreads grad / divisor over its taps
    return (ctx.b.avg_pool2d_backward(grad, ctx.shapes[0], **a),)


def max_unpool2d_forward(b: Any, x: Any, indices: Any, output_size: Pair) -> Any:
    """(N, C, h, w) values written at their flat ``indices`` into zero (N, C, *output_size)
    planes (indices repeated: one of the values lands, as PyTorch)."""
    n, c = x.shape[0], x.shape[1]
    flat = (n, c, x.shape[2] * x.shape[3])
    out = b.put_along_dim_zeros(
        (n, c, output_size[0] * output_size[1]), b.reshape(indices, flat), b.reshape(x, flat), 2
    )
    return b.reshape(out, (n, c, *output_size))


def _unpool_examples(rng: Any) -> Examples:
    def case(x: tuple[int, ...], out: Pair) -> Any:
        # distinct positions per plane, as a max pool with disjoint windows gives
        order = rng.random((x[0] * x[1], out[0] * out[1])).argsort(axis=1)
        idx = order[:, : x[2] * x[3]].reshape(x).astype("int64")
        return ((rng.normal(size=x), idx), {"output_size": out})

    return [case((2, 3, 2, 3), (4, 6)), case((1, 2, 3, 2), (7, 5)), case((1, 1, 1, 4), (1, 9))]


@defop(
    "max_unpool2d",
    arity=2,
    cost=CB,
    saves=Saves.INPUTS,
    forward=max_unpool2d_forward,
    examples=_unpool_examples,
)
def max_unpool2d_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    x_shape, indices = ctx.shapes[0], ctx.inputs[1]
    # each value was written at its index: it reads the gradient back from there
    n, c = x_shape[0], x_shape[1]
    flat = b.reshape(grad, (n, c, grad.shape[2] * grad.shape[3]))
    picked = b.gather(flat, b.reshape(indices, (n, c, x_shape[2] * x_shape[3])), 2)
    return b.reshape(picked, x_shape), None


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
