"""Statistics methods of ``Tensor``: var, std, prod, cumsum, max/min, and floor/ceil/round."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .dispatch import apply

if TYPE_CHECKING:
    from .tensor import Tensor


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


def _rounding(name: str, doc: str) -> Callable[[Tensor], Tensor]:
    spec = OPS[name]

    def method(self: Tensor) -> Tensor:
        dt = self.dtype
        if dt.is_int:
            return self  # already whole numbers
        if dt.is_bool:
            raise DTypeError(f"{name}: expected a numeric tensor, got bool. Convert with .int().")
        return apply(spec, (self,), {})

    method.__name__ = name
    method.__doc__ = doc
    return method


floor = _rounding("floor", "Largest whole number <= each element; zero gradient.")
ceil = _rounding("ceil", "Smallest whole number >= each element; zero gradient.")
round = _rounding("round", "Nearest whole number, halves to even (like PyTorch); zero gradient.")
