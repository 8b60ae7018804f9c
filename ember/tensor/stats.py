"""Statistics methods of ``Tensor``: var, prod, cumsum, full max/min, and floor/ceil/round."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .dispatch import apply

if TYPE_CHECKING:
    from .tensor import Tensor


def var(self: Tensor, dim: int, correction: int = 1) -> Tensor:
    """Variance along ``dim``, kept with size 1: ``sum((x - mean)^2) / (n - correction)``.

    The default ``correction=1`` is the unbiased estimator (Bessel's correction), as in Burn's
    ``var`` and PyTorch's ``var``; pass ``correction=0`` for the biased (population) variance.
    ``n <= correction`` gives inf or nan (nan for n = 0). Float tensors only.

    Example:
        >>> em.tensor([[1.0, 2.0, 3.0]]).var(1).tolist()
        [[1.0]]
    """
    d = checks.dim("var", dim, self.ndim)
    if not isinstance(correction, int) or isinstance(correction, bool) or correction < 0:
        raise DTypeError(f"var: expected an int correction >= 0, got {correction!r}.")
    out = apply(OPS["var"], (self,), {"dim": d, "correction": correction})
    if self.shape[d] == 0:
        out = out + float("nan")  # no samples: undefined (PyTorch's nan), graph kept
    return out


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


def max(self: Tensor) -> Tensor:
    """Largest element (0-d); the gradient goes to its first occurrence."""
    return _full_extremum(self, "max")


def min(self: Tensor) -> Tensor:
    """Smallest element (0-d); the gradient goes to its first occurrence."""
    return _full_extremum(self, "min")


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
