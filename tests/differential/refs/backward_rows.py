"""PyTorch references of the rows in ``ember/ops/backward_rows.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

T = torch.Tensor
aten = torch.ops.aten


def _conv_input_grad(
    g: T, w: T, input_shape: Any, stride: Any, padding: Any, dilation: Any, groups: int
) -> T:
    return torch.nn.grad.conv2d_input(input_shape, w, g, stride, padding, dilation, groups)


def _conv_weight_grad(
    g: T, x: T, weight_shape: Any, stride: Any, padding: Any, dilation: Any, groups: int
) -> T:
    return torch.nn.grad.conv2d_weight(x, weight_shape, g, stride, padding, dilation, groups)


def _avg_back(
    g: T,
    input_shape: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> T:
    x = g.new_zeros(input_shape)
    geo = (list(kernel_size), list(stride), list(padding))
    return aten.avg_pool2d_backward(g, x, *geo, ceil_mode, count_include_pad, divisor_override)


def _adaptive_back(g: T, input_shape: Any) -> T:
    return aten._adaptive_avg_pool2d_backward(g, g.new_zeros(input_shape))


REFS: dict[str, Callable[..., Any]] = {
    "softplus": lambda x: torch.nn.functional.softplus(x),
    "matrix_transpose": lambda x: x.mT,
    "conv2d_input_grad": _conv_input_grad,
    "conv2d_weight_grad": _conv_weight_grad,
    "avg_pool2d_backward": _avg_back,
    "adaptive_avg_pool2d_backward": _adaptive_back,
}
