"""Pooling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d."""

from __future__ import annotations

from collections.abc import Callable

from ..._core.tensor import Tensor
from .. import functional as F
from ..module import Module


class _WindowPool2d(Module):
    """Shared body of the windowed 2-D pools: ``kernel_size``, ``stride`` (defaults to the
    kernel size) and ``padding``, applied by the subclass's functional op."""

    _pool: Callable[..., Tensor]

    def __init__(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return type(self)._pool(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_WindowPool2d):
    """Max over ``kernel_size`` windows (stride defaults to the kernel size).

    Shapes: ``(B, C, H, W) -> (B, C, H', W')``.
    """

    _pool = staticmethod(F.max_pool2d)


class AvgPool2d(_WindowPool2d):
    """Mean over ``kernel_size`` windows (padding counted as zeros, like PyTorch's default).

    Shapes: ``(B, C, H, W) -> (B, C, H', W')``.
    """

    _pool = staticmethod(F.avg_pool2d)


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
