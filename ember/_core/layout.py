"""Layout methods of ``Tensor``: reshape, permute, expand and their spellings (a mixin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ShapeError
from ..ops import OPS
from . import checks
from .dispatch import apply, apply1

if TYPE_CHECKING:
    from .tensor import Tensor

_RESHAPE, _PERMUTE, _EXPAND = OPS["reshape"], OPS["permute"], OPS["expand"]
# resolved arguments of the hot layout ops, checked once per distinct argument: (source shape,
# shape argument) -> target, and (rank, dim1, dim2) -> permutation; None means "no change"
_RESHAPES: dict[tuple[Any, Any], tuple[int, ...] | None] = {}
_SWAPS: dict[tuple[int, int, int], tuple[int, ...] | None] = {}
_CACHE_SIZE = 4096


def _reshape_target(src: Any, shape: Any) -> tuple[int, ...] | None:
    target = checks.reshape_target("reshape", tuple(src), shape)
    out = None if target == src else target
    if type(shape) is tuple:
        if len(_RESHAPES) >= _CACHE_SIZE:
            _RESHAPES.clear()
        try:
            _RESHAPES[src, shape] = out
        except TypeError:  # unhashable sizes: checked again on every call
            pass
    return out


def reshape(self: Tensor, shape: Any) -> Tensor:
    """Same values in ``shape`` (one -1 is inferred)."""
    src = self._data.shape
    if type(shape) is tuple:
        try:
            target = _RESHAPES[src, shape]
        except (KeyError, TypeError):
            target = _reshape_target(src, shape)
    else:
        target = _reshape_target(src, shape)
    if target is None:
        return self
    return apply1(_RESHAPE, self, {"shape": target})


def permute(self: Tensor, dims: Any) -> Tensor:
    """Reorder the axes: output axis i is input axis ``dims[i]``."""
    n = self._data.ndim
    d = checks.dims("permute", dims, n)
    if len(d) != n:
        raise ShapeError(f"permute: expected {n} dims (one per axis), got {tuple(dims)}.")
    if d == tuple(range(n)):
        return self
    return apply(_PERMUTE, (self,), {"dims": d})


def _swap_order(n: int, dim1: int, dim2: int) -> tuple[int, ...] | None:
    a = checks.dim("swap_dims", dim1, n)
    b = checks.dim("swap_dims", dim2, n)
    out = None
    if a != b:
        order = list(range(n))
        order[a], order[b] = order[b], order[a]
        out = tuple(order)
    if type(dim1) is int and type(dim2) is int:  # never bools, which checks.dim rejects
        if len(_SWAPS) >= _CACHE_SIZE:
            _SWAPS.clear()
        _SWAPS[n, dim1, dim2] = out
    return out


def swap_dims(self: Tensor, dim1: int, dim2: int) -> Tensor:
    """Exchange two axes."""
    n = self._data.ndim
    if type(dim1) is int and type(dim2) is int:
        try:
            order = _SWAPS[n, dim1, dim2]
        except KeyError:
            order = _swap_order(n, dim1, dim2)
    else:
        order = _swap_order(n, dim1, dim2)
    if order is None:
        return self
    # two distinct valid dims make a valid permutation: the row directly, without permute's checks
    return apply1(_PERMUTE, self, {"dims": order})


def transpose(self: Tensor) -> Tensor:
    """Swap the last two axes."""
    if self._data.ndim < 2:
        raise ShapeError(
            f"transpose: expected a tensor of rank >= 2, got shape {self.shape}. "
            "Use unsqueeze_dim to add an axis first."
        )
    return swap_dims(self, -2, -1)


def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes ``start_dim..end_dim`` (inclusive) into one."""
    if self.ndim == 0:
        return self.reshape((1,))
    s = checks.dim("flatten", start_dim, self.ndim)
    e = checks.dim("flatten", end_dim, self.ndim)
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}.")
    shape = self.shape
    return self.reshape(
        (*shape[:s], -1, *shape[e + 1 :]) if 0 not in shape else (*shape[:s], 0, *shape[e + 1 :])
    )


def unsqueeze_dim(self: Tensor, dim: int) -> Tensor:
    """Insert a size-1 axis at ``dim`` (-1 appends)."""
    shape = tuple(self._data.shape)
    d = checks.dim("unsqueeze_dim", dim, len(shape) + 1)
    return apply(_RESHAPE, (self,), {"shape": (*shape[:d], 1, *shape[d:])})


def squeeze_dim(self: Tensor, dim: int) -> Tensor:
    """Remove the size-1 axis ``dim``."""
    shape = tuple(self._data.shape)
    d = checks.dim("squeeze_dim", dim, len(shape))
    if shape[d] != 1:
        raise ShapeError(
            f"squeeze_dim: expected size 1 at dim {dim}, got {shape[d]} (shape {shape})."
        )
    return apply(_RESHAPE, (self,), {"shape": shape[:d] + shape[d + 1 :]})


def expand(self: Tensor, shape: Any) -> Tensor:
    """Broadcast to ``shape`` (new leading axes allowed; -1 keeps a size)."""
    shape = checks.sizes("expand", shape, lo=-1)
    want = [s if s != -1 else 0 for s in shape]
    src = self.shape
    if len(want) < len(src):
        raise ShapeError(f"expand: target {tuple(shape)} has fewer axes than the tensor {src}.")
    lead = len(want) - len(src)
    for i in range(lead):
        if shape[i] == -1:
            raise ShapeError(
                f"expand: -1 keeps an existing size, but axis {i} of {tuple(shape)} is a new "
                f"leading axis of the tensor {src}. Give its size."
            )
    for i, s in enumerate(src):
        t = shape[lead + i]
        if t == -1:
            want[lead + i] = s
        elif s != t and s != 1:
            raise ShapeError(
                f"expand: cannot expand size {s} at axis {i} to {t} (shape {src} -> "
                f"{tuple(shape)}). Only size-1 axes expand; use repeat_dim to copy."
            )
    target = tuple(want)
    if target == src:
        return self
    return apply(_EXPAND, (self,), {"shape": target})
