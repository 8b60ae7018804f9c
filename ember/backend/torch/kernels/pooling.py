"""Torch kernels of 2-d max, average and adaptive average pooling, forward and backward."""

from __future__ import annotations

from .stats import Pair, Tensor, _recall, _remember, aten


def max_pool2d(x: Tensor, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair) -> Tensor:
    out, idx = aten.max_pool2d_with_indices(
        x, list(kernel_size), list(stride), list(padding), list(dilation), False
    )
    _remember(x, "maxpool", (kernel_size, stride, padding, dilation), idx)
    return out


def max_pool2d_backward(
    grad: Tensor,
    x: Tensor,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> Tensor:
    """Each output's gradient goes to the first maximum of its window."""
    args = (list(kernel_size), list(stride), list(padding), list(dilation))
    idx = _recall(x, "maxpool", (kernel_size, stride, padding, dilation))
    if idx is None:
        _, idx = aten.max_pool2d_with_indices(x, *args, False)
    return aten.max_pool2d_with_indices_backward(grad, x, *args, False, idx)


def avg_pool2d(x: Tensor, kernel_size: Pair, stride: Pair, padding: Pair) -> Tensor:
    """Mean over each window; zero padding counts in the divisor (count_include_pad=True)."""
    return aten.avg_pool2d(x, list(kernel_size), list(stride), list(padding), False, True, None)


def avg_pool2d_backward(
    grad: Tensor,
    input_shape: tuple[int, ...],
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
) -> Tensor:
    like = grad.new_empty(input_shape)  # the kernel reads only its shape
    return aten.avg_pool2d_backward(
        grad, like, list(kernel_size), list(stride), list(padding), False, True, None
    )


def adaptive_avg_pool2d(x: Tensor, output_size: Pair) -> Tensor:
    return aten._adaptive_avg_pool2d(x, list(output_size))


def adaptive_avg_pool2d_backward(grad: Tensor, input_shape: tuple[int, ...]) -> Tensor:
    return aten._adaptive_avg_pool2d_backward(grad, grad.new_empty(input_shape))
