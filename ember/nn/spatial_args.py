"""Argument checks shared by the convolution and pooling functions of ``em.nn.functional``:
PyTorch's int-or-pair geometry arguments and inputs with or without a batch dim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import checks
from .._core.tensor import Tensor
from ..errors import ShapeError
from .losses import _float

Pair = tuple[int, int]
IntOrPair = int | Sequence[int]
# the largest stride, padding, dilation or kernel size accepted: kernels compute in int64
_MAX_INT_ARG = 1 << 62


def _pair(op: str, name: str, v: Any, minimum: int) -> Pair:
    """An int or a pair of ints (Python or NumPy), each in ``[minimum, 2**62]``.

    A wrong type (a float, None, a string) is a ``DTypeError``, a pair of the wrong length or a
    value out of range a ``ShapeError``.
    """
    if type(v) is int:
        vals: tuple[Any, ...] = (v, v)
    elif type(v) is tuple or type(v) is list:
        vals = tuple(v)
    elif isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, (str, bytes)):
        vals = tuple(v)
    else:
        vals = (v, v)
    if len(vals) != 2:
        raise ShapeError(
            f"{op}: expected {name} to be an int or a pair of ints, got {checks.show(v)}."
        )
    a = checks.int_arg(op, name, vals[0])
    b = checks.int_arg(op, name, vals[1])
    if min(a, b) < minimum or max(a, b) > _MAX_INT_ARG:
        raise ShapeError(
            f"{op}: expected {name} >= {minimum} (and at most 2**62), got {checks.show(v)}."
        )
    return (a, b)


def _batched(op: str, x: Any, n: int, layout: str) -> tuple[Tensor, bool]:
    """A float input with ``n`` spatial dims, (N, C, *) or unbatched (C, *).

    Returns it with a batch dim, and whether one was added.
    """
    x = _float(op, x)
    if x.ndim == n + 2:
        return x, False
    if x.ndim == n + 1:
        return x.unsqueeze_dim(0), True
    raise ShapeError(
        f"{op}: expected a {n + 1} or {n + 2}-D input {layout}, got shape {x.shape}. "
        "Add a batch dim with .unsqueeze_dim(0) or reshape."
    )
