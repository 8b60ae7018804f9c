"""Argument checks that run before any backend call, so backends can trust their inputs.

Each helper raises the documented error type with a message naming the op, what was expected,
what was received, and a hint.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dtype import DType
from ..errors import AutodiffError, DeviceError, DTypeError, ShapeError
from ..ops.registry import Domain

Shape = tuple[int, ...]
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
# no allocation above this succeeds: NumPy and PyTorch index bytes with a signed 64-bit int
_MAX_BYTES = _I64_MAX


def broadcast_shapes(op: str, a: Shape, b: Shape) -> Shape:
    """The broadcast of two shapes, or a ``ShapeError``."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise ShapeError(
                f"{op}: shapes {a} and {b} do not broadcast (axis {-i}: {x} vs {y}). "
                "Sizes must match or be 1 from the right; reshape or unsqueeze_dim one operand."
            )
        out.append(max(x, y) if x != 0 and y != 0 else 0)
    return tuple(reversed(out))


def dim(op: str, d: int, ndim: int) -> int:
    """Normalise a possibly negative dim (an int or NumPy integer), or raise ``ShapeError``."""
    if type(d) is not int:
        if isinstance(d, bool):
            raise DTypeError(f"{op}: dim must be an int, got {d!r}.")
        try:
            d = operator.index(d)  # NumPy integers, e.g. from np.argsort
        except TypeError:
            raise DTypeError(f"{op}: dim must be an int, got {show(d)}.") from None
    if -ndim <= d < ndim:
        return d + ndim if d < 0 else d
    if ndim == 0:
        raise ShapeError(
            f"{op}: dim {d} is out of range: a 0-d tensor has no dims. Use the full reduction or "
            "reshape((1,)) first."
        )
    lo, hi = -ndim, ndim - 1
    raise ShapeError(
        f"{op}: dim {d} is out of range for a tensor of rank {ndim} (expected {lo}..{hi}). "
        "Negative dims count from the end."
    )


def dims(op: str, ds: Sequence[int], ndim: int) -> tuple[int, ...]:
    """Normalise a sequence of distinct dims (``DTypeError`` for a non-sequence)."""
    if type(ds) is not tuple:
        if isinstance(ds, (str, bytes)) or not isinstance(ds, (Sequence, np.ndarray)):
            raise DTypeError(
                f"{op}: expected a sequence of int dims, got {show(ds)} ({type(ds).__name__})."
            )
        ds = tuple(ds)
    out = tuple(dim(op, d, ndim) for d in ds)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: dims {tuple(ds)} repeat an axis; each dim may appear once.")
    return out


def dtype_domain(op: str, domain: Domain, dt: DType) -> None:
    """Reject dtypes an op does not accept (float-only math on ints, arithmetic on bools)."""
    if domain is Domain.FLOAT and not dt.is_float:
        raise DTypeError(
            f"{op}: expected a float tensor, got {dt.name}. Convert first with .float() "
            "(or .cast(em.float64))."
        )
    if domain is Domain.NUMERIC and dt.is_bool:
        raise DTypeError(
            f"{op}: expected a numeric (int or float) tensor, got bool. Convert first with "
            ".int() or .float()."
        )


def same_device(op: str, a: Any, b: Any) -> None:
    if a != b:
        raise DeviceError(
            f"{op}: operands are on {a} and {b}; expected one device. ember never moves data "
            "silently: move one with .to_device(device)."
        )


def same_strategy(op: str, a: Any, b: Any) -> AutodiffError:
    return AutodiffError(
        f"{op}: autodiff operands have different checkpointing strategies, {a.name} and {b.name}; "
        "expected one strategy. Align them with .with_gradient_checkpointing_strategy(...) or "
        "create the operand on the other tensor's device (t.device)."
    )


def show(v: Any) -> str:
    """``repr(v)`` cut to a readable length (a 400-digit int, a long list)."""
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:30]}...({len(r)} chars)"


def _index(op: str, what: str, v: Any) -> int:
    """``v`` as an int: Python and NumPy integers; never a bool, a float or a string."""
    if type(v) is int:
        return v
    if isinstance(v, bool) or isinstance(v, (float, np.floating)):
        pass
    else:
        try:
            return operator.index(v)  # NumPy integers, e.g. from np.argsort or a.shape
        except TypeError:
            pass
    hint = " Floats are never rounded: pass int(v)." if isinstance(v, (float, np.floating)) else ""
    raise DTypeError(f"{op}: expected an int {what}, got {show(v)} ({type(v).__name__}).{hint}")


def int_arg(op: str, name: str, v: Any, lo: int | None = None, hi: int | None = None) -> int:
    """An int argument (Python or NumPy integer) in ``[lo, hi]``.

    A wrong type (bool, float, None) is a ``DTypeError``; a value out of range a ``ShapeError``.
    """
    if type(v) is not int:
        v = _index(op, name, v)
    if lo is not None and v < lo:
        raise ShapeError(f"{op}: expected {name} >= {lo}, got {show(v)}.")
    if hi is not None and v > hi:
        raise ShapeError(f"{op}: expected {name} <= {hi}, got {show(v)}.")
    return v


def float_arg(op: str, name: str, v: Any) -> float:
    """A real-number argument (int, float or NumPy scalar; not bool, None or a string)."""
    if type(v) is float:
        return v
    if not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating)):
        try:
            return float(v)
        except OverflowError:
            raise ShapeError(f"{op}: {name} {show(v)} is beyond the float range.") from None
    raise DTypeError(
        f"{op}: expected {name} to be a real number, got {show(v)} ({type(v).__name__})."
    )


def sizes(op: str, shape: Any, lo: int = 0) -> Shape:
    """A tuple of ints in ``[lo, 2**63)`` from an int or a sequence of (Python or NumPy) ints."""
    if type(shape) is tuple:
        for s in shape:
            if type(s) is not int or s < lo or s > _I64_MAX:
                break
        else:
            return shape
    if isinstance(shape, bool) or not isinstance(shape, (Sequence, np.ndarray)):
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (shape,)
        else:
            raise DTypeError(
                f"{op}: expected a shape (an int or a tuple of ints), got {show(shape)} "
                f"({type(shape).__name__})."
            )
    if isinstance(shape, (str, bytes)):
        raise DTypeError(f"{op}: expected a shape (a tuple of ints), got the string {show(shape)}.")
    out = tuple(_index(op, "size", s) for s in shape)
    for s in out:
        if s < lo or s > _I64_MAX:
            want = ">= 0" if lo == 0 else f">= {lo}"
            raise ShapeError(f"{op}: sizes must be {want} and below 2**63, got {show(out)}.")
    return out


def shape_arg(op: str, shape: Any) -> Shape:
    """Accept an int or a sequence of non-negative ints (Python or NumPy) as a shape.

    Floats are refused (``DTypeError``), never truncated; negative sizes are a ``ShapeError``.
    """
    if type(shape) is tuple:
        for s in shape:
            if type(s) is not int or s < 0 or s > _I64_MAX:
                break
        else:
            return shape  # the common case: a tuple of Python ints
    elif type(shape) is int and 0 <= shape <= _I64_MAX:
        return (shape,)
    return sizes(op, shape)


def alloc(op: str, shape: Shape, dt: DType) -> None:
    """Refuse a tensor whose byte size no address space holds (``ShapeError`` with the bytes)."""
    n = dt.itemsize
    for s in shape:
        n *= s
    if n > _MAX_BYTES:
        raise too_large(op, shape, dt, n)


def too_large(
    op: str, shape: Shape, dt: DType, nbytes: int | None = None, why: str = ""
) -> ShapeError:
    """The ``ShapeError`` of an allocation that cannot succeed: names shape, dtype and bytes."""
    if nbytes is None:
        nbytes = dt.itemsize
        for s in shape:
            nbytes *= s
    size, unit = float(min(nbytes, 1 << 80)), "B"
    for u in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        if size < 1024:
            break
        size /= 1024
        unit = u
    got = f"{nbytes} B" if unit == "B" else f"{size:.1f} {unit}"
    if nbytes > 1 << 80:
        got = "over 1024 ZiB"
    reason = why or "more than any device can address"
    return ShapeError(
        f"{op}: a tensor of shape {show(shape)} and dtype {dt.name} needs {show(nbytes)} bytes "
        f"({got}), {reason}. Use a smaller shape or a smaller dtype."
    )


# the smallest magnitude that rounds to inf in each narrow float dtype (max + half an ulp)
_FLOAT_OVERFLOW = {
    "float16": 65520.0,
    "bfloat16": 2.0**128 - 2.0**119,
    "float32": 2.0**128 - 2.0**103,
}
_INT_RANGES = {
    "int8": (-128, 127),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def fit(op: str, v: int | float | bool, dt: DType) -> int | float | bool:
    """``v`` as a value of dtype ``dt``, or a ``DTypeError`` if ``dt`` cannot hold it.

    Ints must lie in an int dtype's range; floats going to an int dtype must be finite and in
    range (they truncate toward zero, as a cast does). A float dtype takes every number: one
    beyond its range becomes +-inf, as IEEE rounding (and float arithmetic) makes it, on every
    backend alike.
    """
    if dt.kind == "i":
        lo, hi = _INT_RANGES[dt.name]
        if type(v) is int:
            if lo <= v <= hi:
                return v
        elif isinstance(v, bool) or (v == v and lo <= v < hi + 1):
            return v
        raise DTypeError(
            f"{op}: the value {show(v)} does not fit {dt.name} (range {lo}..{hi}"
            + (", and NaN/inf have no int value" if isinstance(v, float) else "")
            + "). Use a value in range, or a wider dtype (em.int64, em.float32)."
        )
    if dt.kind == "f" and not isinstance(v, bool):
        t = _FLOAT_OVERFLOW.get(dt.name)
        if t is not None and not -t < v < t and v == v:
            return math.copysign(math.inf, v)
    return v


def fill_fits(v: Any, dt: DType) -> bool:
    """Cheap test that ``fit`` would return ``v`` unchanged (the common fills 0, 1, 0.5...)."""
    return dt.kind != "i" and -65504 <= v <= 65504


def reshape_target(op: str, src: Shape, shape: Any) -> Shape:
    """Resolve a reshape target (one -1 allowed) against the element count of ``src``."""
    want = list(sizes(op, shape, lo=-(1 << 63)))
    n = 1
    for s in src:
        n *= s
    if want.count(-1) > 1:
        raise ShapeError(f"{op}: at most one -1 is allowed, got {tuple(want)}.")
    known = 1
    for s in want:
        if s != -1:
            if s < 0:
                raise ShapeError(f"{op}: sizes must be >= 0 or -1, got {tuple(want)}.")
            known *= s
    if -1 in want:
        if known == 0 or n % known:
            raise ShapeError(
                f"{op}: cannot infer -1 in {tuple(want)} for {n} elements (shape {src})."
            )
        want[want.index(-1)] = n // known
    elif known != n:
        raise ShapeError(
            f"{op}: target {tuple(want)} holds {known} elements but the tensor {src} holds {n}. "
            "Element counts must match; use -1 for one inferred size."
        )
    return tuple(want)
