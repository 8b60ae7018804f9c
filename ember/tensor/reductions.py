"""Reduction methods of ``Tensor`` (a mixin). ``_dim`` forms keep the reduced axis (size 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ops import OPS
from . import checks
from .dispatch import apply

if TYPE_CHECKING:
    from .tensor import Tensor


def _reduce_dim(t: Tensor, name: str, dim: int) -> Tensor:
    d = checks.dim(name, dim, t.ndim)
    if t.shape[d] == 0 and name in ("max_dim", "min_dim", "argmax", "argmin"):
        from ..errors import ShapeError

        raise ShapeError(f"{name}: dim {dim} has size 0; there is nothing to select.")
    return apply(OPS[name], (t,), {"dim": d})


def sum(self: Tensor) -> Tensor:
    """Sum of all elements (0-d)."""
    return apply(OPS["sum"], (self,), {})


def sum_dim(self: Tensor, dim: int) -> Tensor:
    """Sum along ``dim``, kept with size 1."""
    return _reduce_dim(self, "sum_dim", dim)


def mean(self: Tensor) -> Tensor:
    """Mean of all elements (0-d; float tensors)."""
    return apply(OPS["mean"], (self,), {})


def mean_dim(self: Tensor, dim: int) -> Tensor:
    """Mean along ``dim``, kept with size 1."""
    return _reduce_dim(self, "mean_dim", dim)


def max_dim(self: Tensor, dim: int) -> Tensor:
    """Maximum along ``dim``, kept with size 1."""
    return _reduce_dim(self, "max_dim", dim)


def min_dim(self: Tensor, dim: int) -> Tensor:
    """Minimum along ``dim``, kept with size 1."""
    return _reduce_dim(self, "min_dim", dim)


def argmax(self: Tensor, dim: int) -> Tensor:
    """int64 index of the (first) maximum along ``dim``, kept with size 1."""
    return _reduce_dim(self, "argmax", dim)


def argmin(self: Tensor, dim: int) -> Tensor:
    """int64 index of the (first) minimum along ``dim``, kept with size 1."""
    return _reduce_dim(self, "argmin", dim)
