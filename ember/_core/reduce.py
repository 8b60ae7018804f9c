"""Reductions of ``Tensor`` (``ReduceMethods``, a mixin): sums, means, extrema, statistics,
cumulative sums and sorting.

The Burn ``_dim`` forms keep the reduced dim (size 1); the PyTorch forms (``max(dim)``,
``argmax(dim, keepdim)``, ``var/std(dim, keepdim, correction)``) drop it unless ``keepdim``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import DTypeError, ShapeError
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


def _var_kept(t: Tensor, d: int, correction: int) -> Tensor:
    out = apply(OPS["var"], (t,), {"dim": d, "correction": correction})
    if t.shape[d] == 0:
        out = out + float("nan")  # no samples: undefined (PyTorch's nan), graph kept
    return out


def _reduced_dims(op: str, t: Tensor, dim: int | Sequence[int] | None) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(t.ndim))
    if isinstance(dim, Sequence):
        return checks.dims(op, dim, t.ndim) or tuple(range(t.ndim))
    return (checks.dim(op, dim, t.ndim),)


def _variance(
    self: Tensor, op: str, dim: int | Sequence[int] | None, keepdim: bool, correction: int
) -> Tensor:
    if not isinstance(keepdim, bool):
        raise DTypeError(
            f"{op}: keepdim must be a bool, got {keepdim!r}. The signature is PyTorch's "
            f"{op}(dim=None, keepdim=False, correction=1); pass correction= by keyword."
        )
    if not isinstance(correction, int) or isinstance(correction, bool) or correction < 0:
        raise DTypeError(f"{op}: expected an int correction >= 0, got {correction!r}.")
    if self.ndim == 0:
        if dim is not None and not isinstance(dim, Sequence):
            checks.dim(op, dim, 1)  # a 0-d tensor accepts dim 0 or -1, as PyTorch
        return _var_kept(self.reshape((1,)), 0, correction).reshape(())
    dims = _reduced_dims(op, self, dim)
    kept = tuple(1 if i in dims else n for i, n in enumerate(self.shape))
    rest = [i for i in range(self.ndim) if i not in dims]
    if len(dims) == 1:
        out = _var_kept(self, dims[0], correction)
    else:  # move the reduced dims last and fold them into one
        n = math.prod(self.shape[i] for i in dims)
        folded = self.permute(rest + list(dims)).reshape(tuple(self.shape[i] for i in rest) + (n,))
        out = _var_kept(folded, len(rest), correction)
    return out.reshape(kept if keepdim else tuple(self.shape[i] for i in rest))


def var(
    self: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    correction: int = 1,
) -> Tensor:
    """Variance ``sum((x - mean)^2) / (n - correction)`` over ``dim``, as PyTorch's ``var``.

    ``dim`` is an int, a tuple of dims, or None (all elements, a 0-d result); the reduced dims
    are dropped unless ``keepdim=True``. The default ``correction=1`` is the unbiased estimator
    (Bessel's correction); ``correction=0`` gives the population variance. ``n <= correction``
    gives inf or nan (nan for n = 0). Float tensors only.

    Example:
        >>> em.tensor([[1.0, 2.0, 3.0]]).var(1).tolist()
        [1.0]
    """
    return _variance(self, "var", dim, keepdim, correction)


def std(
    self: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    correction: int = 1,
) -> Tensor:
    """Standard deviation, ``var(dim, keepdim, correction).sqrt()``, as PyTorch's ``std``.

    Example:
        >>> em.tensor([[1.0, 3.0]]).std(1, correction=0).tolist()
        [1.0]
    """
    return _variance(self, "std", dim, keepdim, correction).sqrt()


def prod_dim(self: Tensor, dim: int) -> Tensor:
    """Product along ``dim``, kept with size 1. The gradient is exact when values are zero."""
    d = checks.dim("prod_dim", dim, self.ndim)
    return apply(OPS["prod_dim"], (self,), {"dim": d})


def prod(self: Tensor) -> Tensor:
    """Product of all elements (0-d; 1 for an empty tensor).

    Example:
        >>> em.tensor([[1.0, 2.0], [3.0, 0.5]]).prod().item()
        3.0
    """
    return self.reshape((-1,)).prod_dim(0).reshape(())


def cumsum(self: Tensor, dim: int) -> Tensor:
    """Running sum along ``dim`` (same shape and dtype).

    Example:
        >>> em.tensor([1, 2, 3]).cumsum(0).tolist()
        [1, 3, 6]
    """
    d = checks.dim("cumsum", dim, self.ndim)
    return apply(OPS["cumsum"], (self,), {"dim": d})


def _full_extremum(self: Tensor, op: str) -> Tensor:
    if self.numel() == 0:
        raise ShapeError(
            f"{op}: expected a non-empty tensor, got shape {self.shape}; an empty tensor has "
            f"no {op}imum."
        )
    flat = self.reshape((-1,))
    return (flat.max_dim(0) if op == "max" else flat.min_dim(0)).reshape(())


class _ValuesIndices(NamedTuple):
    """``(values, indices)`` of ``max/min(dim)``, as PyTorch's ``torch.return_types.max``."""

    values: Tensor
    indices: Tensor


def _dim_extremum(self: Tensor, op: str, dim: int, keepdim: bool) -> _ValuesIndices:
    if not isinstance(keepdim, bool):
        raise DTypeError(f"{op}: keepdim must be a bool, got {keepdim!r}.")
    src = self.reshape((1,)) if self.ndim == 0 else self
    d = checks.dim(op, dim, src.ndim)
    values = src.max_dim(d) if op == "max" else src.min_dim(d)
    indices = src.argmax(d, keepdim=True) if op == "max" else src.argmin(d, keepdim=True)
    if self.ndim == 0:
        return _ValuesIndices(values.reshape(()), indices.reshape(()))
    if not keepdim:
        values, indices = values.squeeze_dim(d), indices.squeeze_dim(d)
    return _ValuesIndices(values, indices)


def max(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """Largest element (0-d) or, with ``dim``, ``(values, indices)`` along it, as PyTorch.

    The reduced dim is dropped unless ``keepdim=True``; the gradient goes to the first
    occurrence. ``max_dim`` is the Burn form (values only, dim kept).

    Example:
        >>> v, i = em.tensor([[1.0, 5.0], [7.0, 2.0]]).max(1)
        >>> v.tolist(), i.tolist()
        ([5.0, 7.0], [1, 0])
    """
    if dim is None:
        return _full_extremum(self, "max")
    return _dim_extremum(self, "max", dim, keepdim)


def min(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """Smallest element (0-d) or, with ``dim``, ``(values, indices)`` along it, as PyTorch.

    The reduced dim is dropped unless ``keepdim=True``; the gradient goes to the first
    occurrence. ``min_dim`` is the Burn form (values only, dim kept).
    """
    if dim is None:
        return _full_extremum(self, "min")
    return _dim_extremum(self, "min", dim, keepdim)


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


class ReduceMethods:
    """Reductions, statistics and sorting."""

    __slots__ = ()

    sum = sum
    sum_dim = sum_dim
    mean = mean
    mean_dim = mean_dim
    max_dim = max_dim
    min_dim = min_dim
    argmax = argmax
    argmin = argmin
    max = max
    min = min
    var = var
    std = std
    prod = prod
    prod_dim = prod_dim
    cumsum = cumsum
    sort = sort
    argsort = argsort
    topk = topk
