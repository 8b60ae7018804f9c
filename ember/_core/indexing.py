"""``[]`` indexing: basic keys (ints, slices, None, ...) become the registry's ``index`` row.

A slice with a negative step (``t[::-1]``, ``t[5:1:-2]``) is what NumPy and Burn make of it; the
row takes positive steps only (PyTorch tensors have no others), so ``normalize_key`` returns such
a key as ``Reversed``: the same elements by a positive step, then a flip of those output dims.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from ..errors import DTypeError, ShapeError
from .base import AnyTensor

Key = tuple[Any, ...]


class Reversed(NamedTuple):
    """A key with negative steps: index by ``key`` (positive steps), then flip output ``dims``."""

    key: Key
    dims: tuple[int, ...]


def _forward_slice(k: slice, n: int) -> slice:
    """The positive-step slice over the elements that ``k`` (a negative step) visits."""
    start, stop, step = k.indices(n)
    visited = range(start, stop, step)
    if not visited:
        return slice(0, 0, None)
    return slice(visited[-1], visited[0] + 1, None if step == -1 else -step)


def _as_int(v: Any) -> int | None:
    """``v`` as a Python int (NumPy integers included), or ``None`` if it is not an integer."""
    if type(v) is int:
        return v
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def normalize_key(shape: tuple[int, ...], key: Any) -> Key | Reversed | None:
    """Validate a basic key and return it as a tuple with non-negative ints.

    Returns ``None`` when the key holds tensors or lists (advanced indexing).
    """
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        t = type(k)
        if t is not int and t is not slice:
            break
    else:  # only ints and slices (the common keys): nothing to expand, one axis each
        used = len(key)
        if used > len(shape):
            raise _too_many(used, shape)
        return _normalize(shape, key, used)
    if any(isinstance(k, (AnyTensor, list)) for k in key):
        return None
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise ShapeError("index: at most one ... (Ellipsis) is allowed in a key.")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(shape):
        raise _too_many(used, shape)
    return _normalize(shape, key, used)


def _out_dims(key: list[Any], ellipsis: int) -> int:
    """How many output dims the entries ``key`` produce (an ellipsis stands for ``ellipsis``)."""
    return sum(ellipsis if k is Ellipsis else 0 if type(k) is int else 1 for k in key)


def _too_many(used: int, shape: tuple[int, ...]) -> ShapeError:
    return ShapeError(
        f"index: too many indices ({used}) for a tensor of rank {len(shape)} (shape {shape})."
    )


def _normalize(shape: tuple[int, ...], key: Key, used: int) -> Key | Reversed:
    out: list[Any] = []
    axis = 0
    flips: list[int] = []  # output dims of negative-step slices
    full = True  # every entry a full slice ``:``, so the key selects everything
    for k in key:
        if type(k) is int:
            i = k
        elif k is Ellipsis:
            out.append(k)
            axis += len(shape) - used
            full = False
            continue
        elif k is None:
            out.append(k)
            full = False
            continue
        elif isinstance(k, slice):
            bounds = []
            for v in (k.start, k.stop, k.step):
                b = None if v is None else _as_int(v)
                if v is not None and b is None:
                    raise DTypeError(f"index: slice bounds must be ints or None, got {v!r}.")
                bounds.append(b)
            if bounds[2] is not None and bounds[2] <= 0:
                if bounds[2] == 0:
                    raise ShapeError("index: slice step cannot be zero.")
                flips.append(_out_dims(out, len(shape) - used))  # its output dim
                out.append(_forward_slice(slice(*bounds), shape[axis]))
                full = False
                axis += 1
                continue
            if full and bounds != _FULL:
                full = False
            out.append(slice(*bounds))
            axis += 1
            continue
        elif (j := _as_int(k)) is not None:
            i = j
        else:
            raise DTypeError(
                f"index: expected ints, slices, None, ... or int/bool tensors, got "
                f"{type(k).__name__}."
            )
        n = shape[axis]
        if not -n <= i < n:
            raise ShapeError(
                f"index: index {i} is out of range for axis {axis} of size {n} (shape {shape}); "
                f"expected an index in [{-n}, {n})" + (" (the axis is empty)." if n == 0 else ".")
            )
        out.append(i + n if i < 0 else i)
        axis += 1
        full = False
    if full:
        return ()
    if flips:
        return Reversed(tuple(out), tuple(flips))
    return tuple(out)


_FULL = [None, None, None]
