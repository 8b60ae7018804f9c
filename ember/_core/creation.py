"""Creating tensors: from data, constants, ranges and random distributions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend.registry import seed_all
from ..dtype import DType, as_dtype, bool_, float32, int64
from ..errors import DTypeError, ShapeError
from . import checks
from .base import AnyTensor
from .device import Device, default_device
from .dispatch import as_scalar, wrap

if TYPE_CHECKING:
    from .tensor import Tensor

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
        low = checks.float_arg("Distribution.uniform", "low", low)
        high = checks.float_arg("Distribution.uniform", "high", high)
        if not high >= low:
            raise ShapeError(f"Distribution.uniform: expected low <= high, got {low} > {high}.")
        return Distribution("uniform", float(low), float(high))

    @staticmethod
    def normal(mean: float = 0.0, std: float = 1.0) -> Distribution:
        mean = checks.float_arg("Distribution.normal", "mean", mean)
        std = checks.float_arg("Distribution.normal", "std", std)
        if not std >= 0:
            raise ShapeError(f"Distribution.normal: expected std >= 0, got {std}.")
        return Distribution("normal", float(mean), float(std))

    @staticmethod
    def bernoulli(p: float) -> Distribution:
        p = checks.float_arg("Distribution.bernoulli", "p", p)
        if not 0.0 <= p <= 1.0:
            raise ShapeError(f"Distribution.bernoulli: expected 0 <= p <= 1, got {p}.")
        return Distribution("bernoulli", float(p))


def seed(n: int) -> None:
    """Seed every device's random generator (``Tensor.random``, dropout, shuffling).

    Devices first used after the call are seeded with ``n`` too, so ``em.seed(0)`` followed by
    work on any device draws the same numbers on every run.
    """
    n = checks.int_arg("seed", "n", n, lo=0, hi=(1 << 64) - 1)  # the range every generator takes
    seed_all(n)  # backends created later are seeded with n when they start


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
    if isinstance(data, AnyTensor):
        return data.to_numpy()
    try:
        a = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ShapeError(
            f"from_data: expected nested lists of equal lengths, scalars or an array; {e}"
        ) from None
    if a.dtype == object:
        if _has_big_int(data):
            raise DTypeError(
                "from_data: an int is outside the int64 range (-2**63..2**63-1), the widest "
                "ember int. Pass floats (float(v)) for float data."
            )
        raise ShapeError(
            "from_data: expected nested lists of equal lengths (a rectangular array) of numbers, "
            f"got ragged or non-numeric data of type {type(data).__name__}."
        )
    return a


def _has_big_int(data: Any) -> bool:
    """Whether nested lists hold a Python int that NumPy keeps as an object (beyond 64 bits)."""
    stack, seen = [data], 0
    while stack and seen < 1_000_000:
        v = stack.pop()
        seen += 1
        if isinstance(v, int) and not isinstance(v, bool):
            if not -(1 << 63) <= v < 1 << 63:
                return True
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


# NumPy int dtypes whose every value an ember int dtype holds (np.iinfo costs microseconds)
_SMALL_INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16)]
_FITS = {
    "int8": frozenset([np.dtype(np.int8)]),
    "int32": frozenset(_SMALL_INTS),
    "int64": frozenset([*_SMALL_INTS, np.dtype(np.uint32), np.dtype(np.int64)]),
}


def _is_ember_float(d: np.dtype) -> bool:
    from ..backend.numpy.backend import ember_dtype

    e = ember_dtype(d)
    return e is not None and e.is_float


def _check_values(a: np.ndarray, dt: DType) -> None:
    """Refuse source values that ``dt`` cannot hold (a cast would wrap or saturate them)."""
    k = a.dtype.kind
    if k == "V" and _is_ember_float(a.dtype):
        k = "f"  # ml_dtypes' bfloat16 (NumPy kind "V") is a float source
    if k not in "biuf":
        raise DTypeError(
            f"from_data: unsupported element type {a.dtype}; expected bool, int or float values."
        )
    if dt.kind != "i" or k == "b" or a.size == 0:
        return
    lo, hi = checks._INT_RANGES[dt.name]
    if k == "f":
        if not np.all(np.isfinite(a)):
            raise DTypeError(
                f"from_data: cannot convert non-finite floats (NaN, inf) to {dt.name}: an int "
                "has no NaN. Replace them first (np.nan_to_num) or keep a float dtype."
            )
        bad = a.min() < lo or a.max() >= hi + 1
    elif a.dtype in _FITS[dt.name]:
        return  # every value of the source dtype fits: no scan
    else:
        bad = int(a.min()) < lo or int(a.max()) > hi
    if bad:
        raise DTypeError(
            f"from_data: values range over {checks.show(a.min().item())}.."
            f"{checks.show(a.max().item())}, outside {dt.name}'s {lo}..{hi}. Use a wider dtype "
            "(em.int64, or a float dtype)."
        )


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


def from_data(
    cls: type[Tensor], data: Any, *, device: Device | None = None, dtype: Any = None
) -> Any:
    """A tensor holding a copy of ``data``; Python floats give float32, ints int64."""
    dev = _device(device)
    a = _np_source(data)
    dt = _infer_dtype(a, data) if dtype is None else as_dtype(dtype)
    if a.dtype.kind != "f" or dt.kind != "f":
        _check_values(a, dt)
    elif a.dtype.itemsize > dt.itemsize:
        # values beyond the narrower float's range round to +-inf (IEEE), without NumPy's warning
        with np.errstate(over="ignore"):
            return wrap(cls, dev._plain.b.from_numpy(a, dt), dev._plain, dev._strategy)
    plain = dev._plain
    raw = plain.b.from_numpy(a, dt)
    return wrap(cls, raw, plain, dev._strategy)


def full(
    cls: type[Tensor], shape: Any, value: Any, *, device: Device | None, dtype: Any, op: str
) -> Any:
    dev = _device(device)
    s = checks.shape_arg(op, shape)
    v = as_scalar(op, value)
    if dtype is None:
        dt = bool_ if isinstance(v, bool) else int64 if isinstance(v, int) else float32
    else:
        dt = as_dtype(dtype)
    if not checks.fill_fits(v, dt):
        v = checks.fit(op, v, dt)
    plain = dev._plain
    return wrap(cls, allocate(op, plain.b.full, s, dt, v), plain, dev._strategy)


def fill_value(op: str, value: Any, dt: DType) -> int | float | bool:
    """``value`` as a fill of a ``dt`` tensor (``full_like``): a number ``dt`` holds."""
    v = as_scalar(op, value)
    return v if checks.fill_fits(v, dt) else checks.fit(op, v, dt)


def allocate(op: str, make: Any, shape: tuple[int, ...], dt: DType, *args: Any) -> Any:
    """``make(shape, *args, dt)``, refusing sizes no memory holds with a ``ShapeError``.

    Sizes beyond any address space are refused before the backend runs; a request the
    allocator turns down (``MemoryError``, PyTorch's out-of-memory errors) becomes the same
    ``ShapeError``, naming the bytes requested.
    """
    checks.alloc(op, shape, dt)
    try:
        return make(shape, *args, dt) if args else make(shape, dt)
    except (MemoryError, RuntimeError) as e:
        if isinstance(e, MemoryError) or _out_of_memory(e):
            raise checks.too_large(op, shape, dt, why="more than the allocator could give") from e
        raise


def _out_of_memory(e: BaseException) -> bool:
    """A PyTorch error of a failed allocation (CUDA out of memory, CPU allocator refusal)."""
    if type(e).__name__ == "OutOfMemoryError":
        return True
    msg = str(e)
    return "can't allocate memory" in msg or "out of memory" in msg or "overflowed" in msg


def empty(cls: type[Tensor], shape: Any, *, device: Device | None, dtype: Any) -> Any:
    dev = _device(device)
    s = checks.shape_arg("empty", shape)
    plain = dev._plain
    return wrap(cls, allocate("empty", plain.b.empty, s, as_dtype(dtype)), plain, dev._strategy)


def arange(
    cls: type[Tensor], start: int, end: int | None, step: int, *, device: Device | None
) -> Any:
    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if type(v) is not int or not -(1 << 63) <= v < 1 << 63:
            if not isinstance(v, int) or isinstance(v, bool):
                raise DTypeError(f"arange: expected int bounds and step, got {checks.show(v)}.")
            raise DTypeError(
                f"arange: the bound or step {checks.show(v)} is outside the int64 range of its "
                "values (-2**63..2**63-1)."
            )
    if step == 0:
        raise ShapeError("arange: step must be non-zero.")
    dev = _device(device)
    plain = dev._plain
    n = max(0, -((start - end) // step))  # len(range(start, end, step)), without building it
    if n == 0:  # an empty range, as Python's (PyTorch refuses bounds against the step's sign)
        return wrap(cls, plain.b.empty((0,), int64), plain, dev._strategy)
    b = plain.b
    raw = allocate("arange", lambda _, dt: b.arange(start, end, step, dt), (n,), int64)
    return wrap(cls, raw, plain, dev._strategy)


def random(
    cls: type[Tensor],
    shape: Any,
    distribution: Distribution,
    *,
    device: Device | None,
    dtype: Any,
    generator: Any = None,
) -> Any:
    """Samples of ``distribution`` drawn from ``generator`` (an ``em.Generator``) or, when it is
    ``None``, from the device's default generator."""
    if not isinstance(distribution, Distribution):
        raise DTypeError(
            "random: expected an em.Distribution (Distribution.uniform/normal/bernoulli), got "
            f"{type(distribution).__name__}."
        )
    dev = _device(device)
    s = checks.shape_arg("random", shape)
    dt = as_dtype(dtype)
    plain = dev._plain
    b = plain.b
    if generator is not None:
        from .._generator import sampler

        b = sampler(b, generator)
    if distribution.kind == "bernoulli":
        raw = allocate("random", b.bernoulli, s, dt, distribution.a)
    else:
        if not dt.is_float:
            raise DTypeError(
                f"random: {distribution.kind} samples need a float dtype, got {dt.name}."
            )
        sample = b.uniform if distribution.kind == "uniform" else b.normal
        raw = allocate("random", sample, s, dt, distribution.a, distribution.b)
    return wrap(cls, raw, plain, dev._strategy)
