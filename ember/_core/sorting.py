"""Sorting methods of ``Tensor``: sort (values), argsort (indices), topk (values). All stable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .dispatch import apply

if TYPE_CHECKING:
    from .tensor import Tensor

_SORT, _ARGSORT = OPS["sort"], OPS["argsort"]


def _flag(op: str, descending: object) -> bool:
    if not isinstance(descending, bool):
        raise DTypeError(f"{op}: expected a bool for descending, got {descending!r}.")
    return descending


def sort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    """Values sorted along ``dim`` (ascending unless ``descending``); differentiable.

    Equal values keep their input order. The gradient goes back to each value's source.

    Example:
        >>> em.tensor([3.0, 1.0, 2.0]).sort(0).tolist()
        [1.0, 2.0, 3.0]
    """
    d = checks.dim("sort", dim, self.ndim)
    return apply(_SORT, (self,), {"dim": d, "descending": _flag("sort", descending)})


def argsort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    """int64 indices that sort ``dim`` (stable: equal values keep their input order).

    Example:
        >>> em.tensor([3.0, 1.0, 2.0]).argsort(0).tolist()
        [1, 2, 0]
    """
    d = checks.dim("argsort", dim, self.ndim)
    return apply(_ARGSORT, (self,), {"dim": d, "descending": _flag("argsort", descending)})


def topk(self: Tensor, k: int, dim: int = -1) -> Tensor:
    """The ``k`` largest values along ``dim``, largest first: shape (.., n, ..) -> (.., k, ..).

    Example:
        >>> em.tensor([1.0, 5.0, 3.0]).topk(2, 0).tolist()
        [5.0, 3.0]
    """
    d = checks.dim("topk", dim, self.ndim)
    size = self.shape[d]
    if not isinstance(k, int) or isinstance(k, bool):
        raise DTypeError(f"topk: expected an int k, got {k!r}.")
    if not 0 <= k <= size:
        raise ShapeError(
            f"topk: k {k} is out of range for dim {dim} of size {size}; expected 0 <= k <= {size}."
        )
    return self.sort(d, descending=True).narrow(d, 0, k)
