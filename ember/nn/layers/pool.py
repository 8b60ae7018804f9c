"""Pooling layers, PyTorch's names and arguments: MaxPool1d/2d, AvgPool1d/2d, MaxUnpool1d/2d,
AdaptiveAvgPool2d. Each holds its arguments and calls its ``ember.nn.functional`` op (window
rules: ``ember/nn/pooling.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._core.tensor import Tensor
from .. import functional as F
from ..module import Module

Size = int | tuple[int, ...]


class _MaxPool(Module):
    """Shared body of MaxPool1d/2d: stride defaults to the kernel size."""

    _ndim: int

    def __init__(
        self,
        kernel_size: Size,
        stride: Size | None = None,
        padding: Size = 0,
        dilation: Size = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x: Tensor) -> Any:
        pool = F.max_pool2d if self._ndim == 2 else F.max_pool1d
        args = (self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)
        return pool(x, *args, return_indices=self.return_indices)  # type: ignore[call-overload]

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool2d(_MaxPool):
    """Max over ``kernel_size`` windows (``F.max_pool2d``); with ``return_indices=True`` the
    forward returns (values, int64 flat per-plane indices) for ``MaxUnpool2d``.

    Shapes: ``(B, C, H, W) -> (B, C, H', W')``.
    """

    _ndim = 2


class MaxPool1d(_MaxPool):
    """Max over ``kernel_size`` windows along L (``F.max_pool1d``).

    Shapes: ``(B, C, L) -> (B, C, L')``.
    """

    _ndim = 1


class AvgPool2d(Module):
    """Mean over ``kernel_size`` windows (``F.avg_pool2d``: padding counted as zeros by
    default, like PyTorch; ``divisor_override`` divides every sum by one number).

    Shapes: ``(B, C, H, W) -> (B, C, H', W')``.
    """

    def __init__(
        self,
        kernel_size: Size,
        stride: Size | None = None,
        padding: Size = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"ceil_mode={self.ceil_mode}, count_include_pad={self.count_include_pad}"
        )


class AvgPool1d(Module):
    """Mean over ``kernel_size`` windows along L (``F.avg_pool1d``).

    Shapes: ``(B, C, L) -> (B, C, L')``.
    """

    def __init__(
        self,
        kernel_size: Size,
        stride: Size | None = None,
        padding: Size = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        args = (self.kernel_size, self.stride, self.padding, self.ceil_mode)
        return F.avg_pool1d(x, *args, self.count_include_pad)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"ceil_mode={self.ceil_mode}, count_include_pad={self.count_include_pad}"
        )


class _MaxUnpool(Module):
    """Shared body of MaxUnpool1d/2d: the pooling's kernel, stride and padding."""

    _ndim: int

    def __init__(self, kernel_size: Size, stride: Size | None = None, padding: Size = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(
        self, x: Tensor, indices: Tensor, output_size: Sequence[int] | None = None
    ) -> Tensor:
        unpool = F.max_unpool2d if self._ndim == 2 else F.max_unpool1d
        return unpool(x, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool2d(_MaxUnpool):
    """The inverse of ``MaxPool2d(..., return_indices=True)`` (``F.max_unpool2d``): values
    written at their indices into zero planes; ``output_size`` picks among the sizes a pooling
    maps to the same output.

    Shapes: ``(B, C, h, w)`` values and indices ``-> (B, C, H, W)``.
    """

    _ndim = 2


class MaxUnpool1d(_MaxUnpool):
    """The inverse of ``MaxPool1d(..., return_indices=True)`` (``F.max_unpool1d``).

    Shapes: ``(B, C, l)`` values and indices ``-> (B, C, L)``.
    """

    _ndim = 1


class AdaptiveAvgPool2d(Module):
    """Mean pooling to a fixed ``output_size`` (PyTorch's window boundaries).

    Shapes: ``(B, C, H, W) -> (B, C, *output_size)``.
    """

    def __init__(self, output_size: int | tuple[int, int]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
