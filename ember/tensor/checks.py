"""Argument checks that run before any backend call, so backends can trust their inputs.

Each helper raises the documented error type with a message naming the op, what was expected,
what was received, and a hint.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ..dtype import DType
from ..errors import AutodiffError, DeviceError, DTypeError, ShapeError
from ..ops.registry import Domain

Shape = tuple[int, ...]


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
            raise ShapeError(f"{op}: dim must be an int, got {d!r}.")
        try:
            d = operator.index(d)  # NumPy integers, e.g. from np.argsort
        except TypeError:
            raise ShapeError(f"{op}: dim must be an int, got {d!r}.") from None
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


def shape_arg(op: str, shape: Any) -> Shape:
    """Accept an int or a sequence of non-negative ints as a shape."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: expected a shape (a tuple of ints), got {shape!r}.") from None
    if any(s < 0 for s in out):
        raise ShapeError(f"{op}: sizes must be >= 0, got {out}.")
    return out


def reshape_target(op: str, src: Shape, shape: Any) -> Shape:
    """Resolve a reshape target (one -1 allowed) against the element count of ``src``."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        want = [int(s) for s in shape]
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: expected a shape (tuple of ints), got {shape!r}.") from None
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
