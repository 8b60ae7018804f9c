"""Creating tensors: from data, constants, ranges and random distributions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend.registry import seed_all
from ..dtype import DType, as_dtype, bool_, float32, int64
from ..errors import DTypeError, ShapeError
from . import checks
from .device import Device, default_device
from .dispatch import as_scalar, wrap

_INT_KINDS = "iu"


@dataclass(frozen=True)
class Distribution:
    """A sampling distribution for ``Tensor.random``.

    Example:
        >>> Tensor.random((2, 3), Distribution.normal(0.0, 1.0)).shape
        (2, 3)
    """

    kind: str
    a: float
    b: float = 0.0

    @staticmethod
    def uniform(low: float = 0.0, high: float = 1.0) -> Distribution:
        if not high >= low:
            raise ShapeError(f"Distribution.uniform: expected low <= high, got {low} > {high}.")
        return Distribution("uniform", float(low), float(high))

    @staticmethod
    def normal(mean: float = 0.0, std: float = 1.0) -> Distribution:
        if not std >= 0:
            raise ShapeError(f"Distribution.normal: expected std >= 0, got {std}.")
        return Distribution("normal", float(mean), float(std))

    @staticmethod
    def bernoulli(p: float) -> Distribution:
        if not 0.0 <= p <= 1.0:
            raise ShapeError(f"Distribution.bernoulli: expected 0 <= p <= 1, got {p}.")
        return Distribution("bernoulli", float(p))


def seed(n: int) -> None:
    """Seed every device's random generator (``Tensor.random``, dropout, shuffling).

    Devices first used after the call are seeded with ``n`` too, so ``em.seed(0)`` followed by
    work on any device draws the same numbers on every run.
    """
    seed_all(int(n))  # backends created later are seeded with n when they start


def _device(device: Device | None) -> Device:
    if device is None:
        return default_device()
    if not isinstance(device, Device):
        raise DTypeError(
            f"device: expected an em.Device, got {type(device).__name__}. Pass em.Device.cpu(), "
            "em.Device.torch('cpu') or em.Device.cuda()."
        )
    return device


def _np_source(data: Any) -> np.ndarray:
    from .tensor import Tensor

    if isinstance(data, Tensor):
        return data.to_numpy()
    try:
        a = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ShapeError(
            f"from_data: expected nested lists of equal lengths, scalars or an array; {e}"
        ) from None
    if a.dtype == object:
        raise ShapeError(
            "from_data: expected nested lists of equal lengths (a rectangular array) of numbers, "
            f"got ragged or non-numeric data of type {type(data).__name__}."
        )
    return a


def _infer_dtype(a: np.ndarray, data: Any) -> DType:
    from ..backend.numpy.backend import ember_dtype

    k = a.dtype.kind
    if isinstance(data, (np.ndarray, np.generic)):
        d = ember_dtype(a.dtype)
        if d is not None:
            return d
        if k in _INT_KINDS:
            return int64  # uint8 images and other integer arrays widen to int64
    elif k == "b":
        return bool_
    elif k in _INT_KINDS:
        return int64
    elif k == "f":
        return float32
    raise DTypeError(
        f"from_data: unsupported element type {a.dtype}; expected bool, int or float values."
    )


def from_data(data: Any, *, device: Device | None = None, dtype: Any = None) -> Any:
    """A tensor holding a copy of ``data``; Python floats give float32, ints int64."""
    from .tensor import Tensor

    dev = _device(device)
    a = _np_source(data)
    dt = _infer_dtype(a, data) if dtype is None else as_dtype(dtype)
    if a.dtype.kind == "f" and not dt.is_float and not np.all(np.isfinite(a)):
        raise DTypeError(f"from_data: cannot convert non-finite floats to {dt.name}.")
    plain = dev._plain
    raw = plain.b.from_numpy(a, dt)
    return wrap(Tensor, raw, plain, dev._strategy)


def full(shape: Any, value: Any, *, device: Device | None, dtype: Any, op: str) -> Any:
    from .tensor import Tensor

    dev = _device(device)
    s = checks.shape_arg(op, shape)
    v = as_scalar(op, value)
    if dtype is None:
        dt = bool_ if isinstance(v, bool) else int64 if isinstance(v, int) else float32
    else:
        dt = as_dtype(dtype)
    plain = dev._plain
    return wrap(Tensor, plain.b.full(s, v, dt), plain, dev._strategy)


def empty(shape: Any, *, device: Device | None, dtype: Any) -> Any:
    from .tensor import Tensor

    dev = _device(device)
    s = checks.shape_arg("empty", shape)
    plain = dev._plain
    return wrap(Tensor, plain.b.empty(s, as_dtype(dtype)), plain, dev._strategy)


def arange(start: int, end: int | None, step: int, *, device: Device | None) -> Any:
    from .tensor import Tensor

    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if not isinstance(v, int) or isinstance(v, bool):
            raise DTypeError(f"arange: expected int bounds and step, got {v!r}.")
    if step == 0:
        raise ShapeError("arange: step must be non-zero.")
    dev = _device(device)
    plain = dev._plain
    return wrap(Tensor, plain.b.arange(start, end, step, int64), plain, dev._strategy)


def random(shape: Any, distribution: Distribution, *, device: Device | None, dtype: Any) -> Any:
    from .tensor import Tensor

    if not isinstance(distribution, Distribution):
        raise TypeError(
            "random: expected an em.Distribution (Distribution.uniform/normal/bernoulli), got "
            f"{type(distribution).__name__}."
        )
    dev = _device(device)
    s = checks.shape_arg("random", shape)
    dt = as_dtype(dtype)
    plain = dev._plain
    b = plain.b
    if distribution.kind == "bernoulli":
        raw = b.bernoulli(s, distribution.a, dt)
    else:
        if not dt.is_float:
            raise DTypeError(
                f"random: {distribution.kind} samples need a float dtype, got {dt.name}."
            )
        raw = (b.uniform if distribution.kind == "uniform" else b.normal)(
            s, distribution.a, distribution.b, dt
        )
    return wrap(Tensor, raw, plain, dev._strategy)
