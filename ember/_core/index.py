"""Indexing methods of ``Tensor`` (``IndexMethods``, a mixin): ``t[...]``, slice, select,
gather, scatter (add) and slice_assign.

Index tensors must be int (int32 or int64) and lie in ``[0, size)`` of the indexed dim; both are
checked here, before any backend call, so backends can trust their inputs. Checking the range
reads the indices on the host.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtype import promote
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .advanced import index_with_tensors
from .base import AnyTensor
from .dispatch import apply, cast
from .indexing import Reversed, normalize_key

if TYPE_CHECKING:
    from .tensor import Tensor


_SELECT, _GATHER, _SCATTER = OPS["select"], OPS["gather"], OPS["scatter"]
_SLICE_ASSIGN = OPS["slice_assign"]
_INDEX = OPS["index"]


def index_tensor(op: str, indices: Any) -> Tensor:
    """``indices`` as an int tensor, or a ``DTypeError`` naming ``op``."""
    if not isinstance(indices, AnyTensor):
        raise DTypeError(
            f"{op}: expected an int tensor of indices, got {type(indices).__name__}. "
            "Wrap them with em.tensor([...]) (int64)."
        )
    if not indices.dtype.is_int:
        raise DTypeError(
            f"{op}: expected an int tensor of indices, got {indices.dtype.name}. "
            "Convert with .int() (floats truncate) or build them with Tensor.arange."
        )
    return indices


def check_range(op: str, indices: Tensor, dim: int, size: int) -> None:
    """Every index in ``[0, size)``, or a ``ShapeError`` naming the op, dim and size.

    Checked on every device: an out-of-range index on CUDA would otherwise end in a device-side
    assert that poisons the whole CUDA context. (The training hot paths, ``embedding`` and the
    losses' class labels, skip their host check on CUDA instead: see ``nn.losses._index_range``.)
    """
    if indices.numel() == 0:
        return
    a = indices.to_numpy()
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= size:
        bad = lo if lo < 0 else hi
        raise ShapeError(
            f"{op}: index {bad} is out of range for dim {dim} of size {size}; expected indices "
            f"in [0, {size}). Clamp them or check how they were computed."
        )


def select(self: Tensor, dim: int, indices: Tensor) -> Tensor:
    """Slices ``indices`` (a 1-D int tensor) of ``dim``, in that order; repeats allowed.

    Args:
        dim: The dim to index (negative counts from the end).
        indices: Int tensor of shape (K,) with values in ``[0, shape[dim])``.

    Returns:
        The input's shape with ``shape[dim]`` replaced by K. The gradient adds up over repeats.

    Example:
        >>> em.tensor([[1.0, 2.0], [3.0, 4.0]]).select(0, em.tensor([1, 1])).tolist()
        [[3.0, 4.0], [3.0, 4.0]]
    """
    d = checks.dim("select", dim, self.ndim)
    idx = index_tensor("select", indices)
    if idx.ndim != 1:
        raise ShapeError(
            f"select: expected 1-D indices, got shape {idx.shape}. Flatten them with "
            ".reshape(-1) (and reshape the result), or use [] indexing."
        )
    check_range("select", idx, d, self.shape[d])
    return apply(_SELECT, (self, idx), {"dim": d})


def _gather_shapes(op: str, x: Tensor, idx: Tensor, d: int) -> None:
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"{op}: expected indices of the same rank as the tensor ({x.ndim}), got shape "
            f"{idx.shape} for a tensor of shape {x.shape}. Add axes with unsqueeze_dim."
        )
    for i, (n, m) in enumerate(zip(idx.shape, x.shape)):
        if i != d and n > m:
            raise ShapeError(
                f"{op}: indices {idx.shape} are larger than the tensor {x.shape} at dim {i} "
                f"({n} > {m}); expected at most the tensor's size on every dim except {d}."
            )


def gather(self: Tensor, dim: int, indices: Tensor) -> Tensor:
    """``out[..., i, ...] = self[..., indices[..., i, ...], ...]`` along ``dim`` (like PyTorch).

    Args:
        dim: The dim the indices refer to.
        indices: Int tensor of the input's rank; on every other dim at most the input's size.

    Returns:
        A tensor of the indices' shape. The gradient is scatter-added back.

    Example:
        >>> em.tensor([[1.0, 2.0], [3.0, 4.0]]).gather(1, em.tensor([[1], [0]])).tolist()
        [[2.0], [3.0]]
    """
    d = checks.dim("gather", dim, self.ndim)
    idx = index_tensor("gather", indices)
    _gather_shapes("gather", self, idx, d)
    check_range("gather", idx, d, self.shape[d])
    return apply(_GATHER, (self, idx), {"dim": d})


def scatter(self: Tensor, dim: int, indices: Tensor, values: Tensor) -> Tensor:
    """A copy of ``self`` with ``values`` added at ``indices`` along ``dim`` (Burn's scatter).

    Args:
        dim: The dim the indices refer to.
        indices: Int tensor of the input's rank, at most its size on the other dims.
        values: Tensor of the indices' shape; repeated indices add up.

    Returns:
        The input's shape. Gradients: ``self`` gets the incoming gradient, ``values`` its gather.

    Example:
        >>> em.tensor([0.0, 0.0]).scatter(0, em.tensor([1, 1]), em.tensor([1.0, 2.0])).tolist()
        [0.0, 3.0]
    """
    d = checks.dim("scatter", dim, self.ndim)
    idx = index_tensor("scatter", indices)
    if not isinstance(values, AnyTensor):
        raise DTypeError(f"scatter: expected a values tensor, got {type(values).__name__}.")
    _gather_shapes("scatter", self, idx, d)
    if values.shape != idx.shape:
        raise ShapeError(
            f"scatter: expected values of the indices' shape {idx.shape}, got {values.shape}."
        )
    check_range("scatter", idx, d, self.shape[d])
    x, v = _common_dtype(self, values)
    return apply(_SCATTER, (x, idx, v), {"dim": d})


def _common_dtype(x: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    if x.dtype is v.dtype:
        return x, v
    dt = promote(x.dtype, v.dtype)
    return cast(x, dt), cast(v, dt)


def region_shape(shape: tuple[int, ...], key: tuple[Any, ...]) -> tuple[int, ...]:
    """The shape ``x[key]`` would have, for a normalised basic key (no data touched)."""
    return tuple(np.broadcast_to(np.empty((), np.int8), shape)[key].shape)


def slice_key(op: str, ranges: Any) -> tuple[Any, ...]:
    """Validate ``slice``/``slice_assign`` ranges: one ``slice`` (or int, or ``...``) per dim."""
    if isinstance(ranges, builtins.slice):
        return (ranges,)
    if not isinstance(ranges, (list, tuple)):
        raise DTypeError(
            f"{op}: expected a list of slices (one per leading dim), got "
            f"{type(ranges).__name__}. Write t.{op}([slice(0, 2), slice(1, None)])."
        )
    for k in ranges:
        if not (isinstance(k, (builtins.slice, int, np.integer)) or k is Ellipsis) or isinstance(
            k, bool
        ):
            raise DTypeError(
                f"{op}: expected slices or ints (one per leading dim), got {k!r}. "
                "Use t[...] for None and index tensors, mask_where or scatter to write."
            )
    return tuple(ranges)


def slice_assign(self: Tensor, ranges: Sequence[Any], values: Tensor) -> Tensor:
    """A copy of ``self`` whose region ``self[ranges]`` holds ``values`` (broadcast to it).

    Args:
        ranges: One ``slice`` (or int) per leading dim, as for ``slice``: ``[slice(0, 2)]``.
        values: A tensor that broadcasts to the region's shape.

    Returns:
        The input's shape (dtypes promote). Gradients: ``self`` outside the region, ``values``
        the region's gradient (summed over broadcast axes).

    Example:
        >>> em.tensor([1.0, 2.0, 3.0]).slice_assign([slice(0, 2)], em.tensor([0.0, 0.0])).tolist()
        [0.0, 0.0, 3.0]
    """
    if not isinstance(values, AnyTensor):
        raise DTypeError(f"slice_assign: expected a values tensor, got {type(values).__name__}.")
    key = slice_key("slice_assign", ranges)
    norm = normalize_key(self.shape, key)
    assert norm is not None  # tensors and lists were rejected above
    region = region_shape(self.shape, norm.key if type(norm) is Reversed else norm)
    try:
        fits = checks.broadcast_shapes("slice_assign", region, values.shape) == region
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(
            f"slice_assign: values of shape {values.shape} do not fit the region {region} "
            f"selected by {key}; expected a shape that broadcasts to the region."
        )
    if type(norm) is Reversed:  # negative steps: write the flipped values by positive ones
        v = values if values.shape == region else values.expand(region)
        return self.slice_assign(list(norm.key), v.flip(list(norm.dims)))
    x, v = _common_dtype(self, values)
    return apply(_SLICE_ASSIGN, (x, v), {"key": norm})


def __getitem__(self: Tensor, key: Any) -> Tensor:
    norm = normalize_key(tuple(self._data.shape), key)
    if norm is None:  # int or bool tensors (or lists) in the key
        return index_with_tensors(self, key)
    if not norm:
        return self
    if type(norm) is Reversed:  # negative steps: positive ones, then a flip
        return apply(_INDEX, (self,), {"key": norm.key}).flip(list(norm.dims))
    return apply(_INDEX, (self,), {"key": norm})


def slice(self: Tensor, ranges: Sequence[builtins.slice | builtins.int] | builtins.slice) -> Tensor:
    """One ``slice`` (or int) per leading dim: ``t.slice([slice(0, 2)]) == t[0:2]``.

    A single ``slice`` stands for a one-element list, as in ``slice_assign``; ``None``,
    lists and index tensors raise ``DTypeError`` (use ``t[...]`` for those).
    """
    return self[slice_key("slice", ranges)]


class IndexMethods:
    """Reading and writing elements by position."""

    __slots__ = ()

    __getitem__ = __getitem__
    slice = slice
    select = select
    gather = gather
    scatter = scatter
    slice_assign = slice_assign
