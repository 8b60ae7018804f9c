"""Torch kernels of 2-d max, average and adaptive average pooling, forward and backward, and the
argmax indices of max pooling."""

from __future__ import annotations

from .stats import Pair, Tensor, _recall, _remember, aten


def _with_indices(
    x: Tensor, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair, ceil_mode: bool
) -> tuple[Tensor, Tensor]:
    geo = (list(kernel_size), list(stride), list(padding), list(dilation))
    return aten.max_pool2d_with_indices(x, *geo, ceil_mode)


def max_pool2d(
    x: Tensor,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool = False,
) -> Tensor:
    out, idx = _with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
    _remember(x, "maxpool", (kernel_size, stride, padding, dilation, ceil_mode), idx)
    return out


def max_pool2d_indices(
    x: Tensor,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool = False,
) -> Tensor:
    """Each window's argmax as a flat index into its (H, W) plane (int64)."""
    idx = _recall(x, "maxpool", (kernel_size, stride, padding, dilation, ceil_mode))
    if idx is None:
        idx = _with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)[1]
    return idx


def max_pool2d_backward(
    grad: Tensor,
    x: Tensor,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool = False,
) -> Tensor:
    """Each output's gradient goes to the first maximum of its window."""
    idx = max_pool2d_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
    geo = (list(kernel_size), list(stride), list(padding), list(dilation))
    return aten.max_pool2d_with_indices_backward(grad, x, *geo, ceil_mode, idx)


def avg_pool2d(
    x: Tensor,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Each window's sum over its divisor (see the NumPy kernel)."""
    geo = (list(kernel_size), list(stride), list(padding))
    return aten.avg_pool2d(x, *geo, ceil_mode, count_include_pad, divisor_override)


def avg_pool2d_backward(
    grad: Tensor,
    input_shape: tuple[int, ...],
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    like = grad.new_empty(input_shape)  # the kernel reads only its shape
    geo = (list(kernel_size), list(stride), list(padding))
    return aten.avg_pool2d_backward(
        grad, like, *geo, ceil_mode, count_include_pad, divisor_override
    )


def adaptive_avg_pool2d(x: Tensor, output_size: Pair) -> Tensor:
    return aten._adaptive_avg_pool2d(x, list(output_size))


def adaptive_avg_pool2d_backward(grad: Tensor, input_shape: tuple[int, ...]) -> Tensor:
    return aten._adaptive_avg_pool2d_backward(grad, grad.new_empty(input_shape))
