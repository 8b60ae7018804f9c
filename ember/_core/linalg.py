"""The matrix product of ``Tensor``: ``matmul`` and ``@`` (``LinalgMethods``, a mixin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from . import dispatch as _dispatch
from .base import AnyTensor
from .dispatch import apply, apply2

if TYPE_CHECKING:
    from .tensor import Tensor

_MATMUL = OPS["matmul"]


def matmul(self: Tensor, other: Tensor) -> Tensor:
    """Matrix product with NumPy/PyTorch semantics: 1-D operands and broadcast batch dims."""
    if not isinstance(other, AnyTensor):
        if getattr(other, "is_quantized", None) is not None:  # a QuantizedTensor: qops.py
            from .qops import matmul as quantized_matmul

            return quantized_matmul(self, other)
        raise DTypeError(f"matmul: expected a Tensor operand, got {type(other).__name__}.")
    a, c = self._data, other._data
    if a.ndim == 2 and c.ndim == 2 and a.shape[1] == c.shape[0] and a.dtype == c.dtype:
        return apply2(_MATMUL, self, other)  # fast path: 2-D product (apply2 autocasts it)
    x, y = self, other
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(
            f"matmul: expected operands of rank >= 1, got shapes {x.shape} and {y.shape}. "
            "Use * for scaling by a scalar."
        )
    squeeze_l = x.ndim == 1
    squeeze_r = y.ndim == 1
    if squeeze_l:
        x = x.unsqueeze_dim(0)
    if squeeze_r:
        y = y.unsqueeze_dim(-1)
    if x.shape[-1] != y.shape[-2]:
        raise ShapeError(
            f"matmul: inner sizes differ, lhs {self.shape} vs rhs {other.shape}. The last axis "
            "of lhs pairs with the second-to-last of rhs; did you mean rhs.transpose()?"
        )
    checks.broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
    if x.dtype is not y.dtype:
        x, y = _dispatch.unify(_MATMUL, (x, y))
    out = apply(_MATMUL, (x, y), {})
    if squeeze_l:
        out = out.squeeze_dim(-2)
    if squeeze_r:
        out = out.squeeze_dim(-1)
    return out


def __rmatmul__(self: Tensor, other: Any) -> Tensor:
    raise DTypeError(f"matmul: expected a Tensor operand, got {type(other).__name__}.")


class LinalgMethods:
    """``matmul`` and the ``@`` operators."""

    __slots__ = ()

    matmul = matmul
    __matmul__ = matmul
    __rmatmul__ = __rmatmul__
