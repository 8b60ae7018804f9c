"""Torch kernels of 2-d convolution and transposed convolution, forward and backward."""

from __future__ import annotations

from .stats import Pair, Tensor, aten


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> Tensor:
    return aten.convolution(
        x, weight, bias, list(stride), list(padding), list(dilation), False, [0, 0], groups
    )


def conv2d_backward(
    grad: Tensor,
    x: Tensor,
    weight: Tensor,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
    need_bias: bool = True,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """Gradients of ``conv2d`` for x, weight and bias, each only when asked for."""
    gx, gw, gb = aten.convolution_backward(
        grad,
        x,
        weight,
        [weight.shape[0]],
        list(stride),
        list(padding),
        list(dilation),
        False,
        [0, 0],
        groups,
        [need_input, need_weight, need_bias],
    )
    return gx, gw, gb


def conv_transpose2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    groups: int,
    dilation: Pair,
) -> Tensor:
    """The adjoint of conv2d: ``weight`` is (C_in, C_out / groups, kh, kw)."""
    return aten.convolution(
        x,
        weight,
        bias,
        list(stride),
        list(padding),
        list(dilation),
        True,
        list(output_padding),
        groups,
    )


def conv_transpose2d_backward(
    grad: Tensor,
    x: Tensor,
    weight: Tensor,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
    need_bias: bool = True,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    # the output padding that gave grad's size: out = (h - 1) s - 2 p + d (k - 1) + op + 1
    kh, kw = weight.shape[2:]
    op = [
        grad.shape[2 + i]
        - ((x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + 1)
        for i, k in enumerate((kh, kw))
    ]
    gx, gw, gb = aten.convolution_backward(
        grad,
        x,
        weight,
        [weight.shape[1] * groups],
        list(stride),
        list(padding),
        list(dilation),
        True,
        op,
        groups,
        [need_input, need_weight, need_bias],
    )
    return gx, gw, gb
