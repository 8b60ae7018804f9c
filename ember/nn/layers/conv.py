"""Convolution layers: Conv1d, Conv2d, ConvTranspose2d (PyTorch layouts and initialisation)."""

from __future__ import annotations

from typing import cast

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param


def _pair(op: str, v: int | tuple[int, ...], n: int) -> tuple[int, ...]:
    t = (v,) * n if isinstance(v, int) else tuple(v)
    if len(t) != n:
        raise ShapeError(f"{op}: expected an int or a tuple of {n} ints, got {v!r}.")
    return t


def _padding(
    op: str, v: str | int | tuple[int, ...], n: int, stride: tuple[int, ...], transposed: bool
) -> str | tuple[int, ...]:
    """``"same"`` / ``"valid"`` kept as given (as PyTorch), else an n-tuple of ints."""
    if not isinstance(v, str):
        return _pair(op, v, n)
    if transposed or v not in ("same", "valid"):
        allowed = "an int or a tuple" if transposed else "'same', 'valid', an int or a tuple"
        raise ShapeError(f"{op}: expected padding {allowed} of {n} ints, got {v!r}.")
    if v == "same" and any(s != 1 for s in stride):
        raise ShapeError(
            f"{op}: padding='same' needs stride 1, got stride {stride}. Pad explicitly instead."
        )
    return v


class _ConvNd(Module):
    def __init__(
        self,
        op: str,
        n: int,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...],
        padding: str | int | tuple[int, ...],
        dilation: int | tuple[int, ...],
        groups: int,
        bias: bool,
        transposed: bool,
        device: Device | None,
        dtype: DType,
    ) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"{op}: expected in_channels and out_channels divisible by groups, got "
                f"{in_channels}, {out_channels} and groups={groups}."
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _pair(op, kernel_size, n)
        self.stride = _pair(op, stride, n)
        self.padding = _padding(op, padding, n, self.stride, transposed)
        self.dilation = _pair(op, dilation, n)
        if transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        # PyTorch computes fan_in from weight.shape[1] in both layouts, as init.fans does
        fan_in = init.fans(shape)[0]
        self.weight = Param(init.kaiming_uniform(shape, device=device, dtype=dtype))
        self.bias = (
            Param(init.bias_uniform((out_channels,), fan_in, device=device, dtype=dtype))
            if bias
            else None
        )

    def _bias(self) -> Tensor | None:
        return None if self.bias is None else self.bias.val()

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}"
        )


class Conv1d(_ConvNd):
    """1-D convolution; weight ``[out, in / groups, k]``.

    Shapes: ``(B, C_in, L) -> (B, C_out, L')``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: str | int = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(
            "Conv1d", 1, in_channels, out_channels, kernel_size, stride, padding, dilation,
            groups, bias, False, device, dtype,
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(
            x, self.weight.val(), self._bias(), self.stride[0],
            self.padding if isinstance(self.padding, str) else self.padding[0],
            self.dilation[0], self.groups,
        )  # fmt: skip


class Conv2d(_ConvNd):
    """2-D convolution; weight ``[out, in / groups, kh, kw]``.

    Shapes: ``(B, C_in, H, W) -> (B, C_out, H', W')``. ``padding`` is ``"same"`` (stride 1;
    an odd total pads the extra row / column at the bottom / right), ``"valid"``, an int or a
    pair, as PyTorch; a string is kept as given in ``self.padding``.

    Example:
        >>> Conv2d(3, 8, 3, padding=1)(Tensor.ones((2, 3, 16, 16))).shape
        (2, 8, 16, 16)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: str | int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(
            "Conv2d", 2, in_channels, out_channels, kernel_size, stride, padding, dilation,
            groups, bias, False, device, dtype,
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(
            x, self.weight.val(), self._bias(), self.stride, self.padding, self.dilation,
            self.groups,
        )  # fmt: skip


class ConvTranspose2d(_ConvNd):
    """2-D transposed convolution; weight ``[in, out / groups, kh, kw]`` (PyTorch layout).

    Shapes: ``(B, C_in, H, W) -> (B, C_out, H', W')`` with
    ``H' = (H - 1) s - 2 p + d (k - 1) + output_padding + 1``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        output_padding: int | tuple[int, int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, int] = 1,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(
            "ConvTranspose2d", 2, in_channels, out_channels, kernel_size, stride, padding,
            dilation, groups, bias, True, device, dtype,
        )  # fmt: skip
        self.output_padding = _pair("ConvTranspose2d", output_padding, 2)

    def forward(self, x: Tensor) -> Tensor:
        # _padding refuses a string for a transposed layer
        pad = cast(tuple[int, ...], self.padding)
        return F.conv_transpose2d(
            x, self.weight.val(), self._bias(), self.stride, pad, self.output_padding,
            self.groups, self.dilation,
        )  # fmt: skip
