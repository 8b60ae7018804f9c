"""Reading a ``Tensor``: shape, dtype, device, and the host reads (``to_numpy``, ``item``, ...).

``ReadingMethods`` is a mixin of ``Tensor`` (ember/_core/tensor.py). The host reads copy values
off the device; everything else reads fields only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DTypeError, ShapeError
from .hostread import host_read

if TYPE_CHECKING:
    from ..dtype import DType
    from .device import Device
    from .tensor import Tensor


def shape(self: Tensor) -> tuple[int, ...]:
    return tuple(self._data.shape)


def ndim(self: Tensor) -> int:
    return self._data.ndim


def dtype(self: Tensor) -> DType:
    return self._dev.b.dtype_of(self._data)


def device(self: Tensor) -> Device:
    """The device, wrapped as autodiff with this tensor's strategy when it is autodiff."""
    return self._dev._with(self._strategy)


def numel(self: Tensor) -> int:
    n = 1
    for s in self._data.shape:
        n *= s
    return n


def to_numpy(self: Tensor) -> np.ndarray:
    """A NumPy copy of the values."""
    host_read("Tensor.to_numpy()")
    return self._dev.b.to_numpy(self._data)


def __array__(self: Tensor, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
    a = self.to_numpy()
    return a if dtype is None else a.astype(dtype)


def item(self: Tensor) -> float | int | bool:
    """The single value as a Python number."""
    host_read("Tensor.item()")
    if self.numel() != 1:
        raise ShapeError(
            f"item: expected a tensor with one element, got shape {self.shape}. "
            "Reduce it first (sum(), mean()) or index one element."
        )
    return self.to_numpy().reshape(()).item()


def tolist(self: Tensor) -> Any:
    return self.to_numpy().tolist()


def __repr__(self: Tensor) -> str:
    body = np.array2string(self.to_numpy(), separator=", ", threshold=64, edgeitems=3)
    ctx = ""
    if self._strategy is not None:
        state = (
            "require_grad" if self.is_require_grad() else "tracked" if self._node else "untracked"
        )
        ctx = f", autodiff={self._strategy.name}, {state}"
    return f"Tensor({body}, dtype={self.dtype.name}, device={self._dev}{ctx})"


def __len__(self: Tensor) -> int:
    if self._data.ndim == 0:
        raise ShapeError("len: a 0-d tensor has no length; use item().")
    return int(self._data.shape[0])


def __iter__(self: Tensor) -> Iterator[Tensor]:
    for i in range(len(self)):
        yield self[i]


def __bool__(self: Tensor) -> bool:
    return bool(self.item())


def __float__(self: Tensor) -> float:
    return float(self.item())


def __int__(self: Tensor) -> int:
    return int(self.item())


def __index__(self: Tensor) -> int:
    if self.dtype.is_float or self.numel() != 1:
        raise DTypeError(
            f"__index__: expected a one-element int tensor, got {self.dtype.name} {self.shape}."
        )
    return int(self.item())


class ReadingMethods:
    """Shape, dtype and device fields, and the values read on the host."""

    __slots__ = ()

    shape = property(shape)
    ndim = property(ndim)
    dtype = property(dtype)
    device = property(device)
    numel = numel
    to_numpy = to_numpy
    __array__ = __array__
    item = item
    tolist = tolist
    __repr__ = __repr__
    __len__ = __len__
    __iter__ = __iter__
    __bool__ = __bool__
    __float__ = __float__
    __int__ = __int__
    __index__ = __index__
