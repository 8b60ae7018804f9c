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


def _arg_extremum(t: Tensor, name: str, dim: int | None, keepdim: bool) -> Tensor:
    if not isinstance(keepdim, bool):
        from ..errors import DTypeError

        raise DTypeError(f"{name}: keepdim must be a bool, got {keepdim!r}.")
    if dim is None or t.ndim == 0:
        if dim is not None:
            checks.dim(name, dim, 1)  # a 0-d tensor accepts dim 0 or -1, as PyTorch
        if t.numel() == 0:
            from ..errors import ShapeError

            raise ShapeError(
                f"{name}: expected a non-empty tensor, got shape {t.shape}; there is nothing "
                "to select."
            )
        flat = _reduce_dim(t.reshape((-1,)), name, 0)
        return flat.reshape((1,) * t.ndim if keepdim else ())
    d = checks.dim(name, dim, t.ndim)
    out = _reduce_dim(t, name, d)
    return out if keepdim else out.squeeze_dim(d)


def argmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """int64 index of the (first) maximum along ``dim``, as PyTorch's ``argmax``.

    The reduced dim is dropped unless ``keepdim=True``; ``dim=None`` indexes the flattened
    tensor (a 0-d result). Use ``max_dim`` for the Burn form that keeps the dim of the values.

    Example:
        >>> em.tensor([[1.0, 5.0], [7.0, 2.0]]).argmax(1).tolist()
        [1, 0]
    """
    return _arg_extremum(self, "argmax", dim, keepdim)


def argmin(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """int64 index of the (first) minimum along ``dim``, as PyTorch's ``argmin``.

    The reduced dim is dropped unless ``keepdim=True``; ``dim=None`` indexes the flattened
    tensor (a 0-d result).

    Example:
        >>> em.tensor([[1.0, 5.0], [7.0, 2.0]]).argmin(1).tolist()
        [0, 1]
    """
    return _arg_extremum(self, "argmin", dim, keepdim)
