"""Products with quantized operands: ``matmul`` / ``@``, ``F.linear`` and ``F.embedding``.

- Two quantized 2-D operands, symmetric, whose scales are shared along the summed axis (per
  tensor, or per row of the left and per column of the right): the int8 values are multiplied
  with int32 accumulation by the backend's ``int8_matmul`` (``torch._int_mm`` on torch), and
  the int32 sums scaled by ``s_left * s_right``. Exact up to that one float32 scaling.
- A float operand with a quantized one (a quantized weight): the ``int8_weight_linear`` row
  (``ember/ops/qmatmul.py``: the int8 values dequantized inside the product, the scales applied
  to its output) when the scales are shared along the summed axis (a Linear weight quantized
  per output channel, or per tensor); otherwise the quantized operand is dequantized first.
  Either way the result equals the product with ``dequantize()`` up to float rounding, and
  gradients flow to the float operand only (the quantized one is a constant, SEMANTICS.md §11).
- Anything else dequantizes the quantized operands and multiplies the floats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dtype import float32, promote
from ..errors import DTypeError, ShapeError
from ..ops.registry import OPS
from .base import AnyTensor as TensorBase
from .dispatch import apply
from .qlayout import QuantizedLayoutMethods

if TYPE_CHECKING:
    from .quantized import QuantizedTensor
    from .tensor import Tensor
else:  # isinstance through the class's base: quantized.py imports this module's users
    QuantizedTensor = QuantizedLayoutMethods

Operand = Any  # a Tensor or a QuantizedTensor
_WEIGHT_LINEAR = OPS["int8_weight_linear"]


def _check_operand(op: str, x: object) -> None:
    if not isinstance(x, (TensorBase, QuantizedTensor)):
        raise DTypeError(f"{op}: expected a Tensor operand, got {type(x).__name__}.")


def _int_path_ok(a: QuantizedTensor, b: QuantizedTensor) -> bool:
    """Both symmetric 2-D, scales shared along K: (M, 1)/(1, 1) on the left, (1, N)/(1, 1)."""
    return (
        a.ndim == 2
        and b.ndim == 2
        and not a._scheme.is_affine
        and not b._scheme.is_affine
        and a._scales.shape[1] == 1
        and b._scales.shape[0] == 1
    )


def matmul(a: Operand, b: Operand) -> Tensor:
    """``a @ b`` where one or both operands are quantized (see the module docstring)."""
    _check_operand("matmul", a)
    _check_operand("matmul", b)
    qa, qb = isinstance(a, QuantizedTensor), isinstance(b, QuantizedTensor)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul: expected operands of rank >= 1, got shapes {a.shape} and {b.shape}."
        )
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(
            f"matmul: inner sizes differ, lhs {a.shape} vs rhs {b.shape}. The last axis of lhs "
            "pairs with the second-to-last of rhs; did you mean rhs.transpose()?"
        )
    if qa and qb:
        if _int_path_ok(a, b):
            return _int_product(a, b)
        return a.dequantize() @ b.dequantize()
    if qb:
        if a.ndim >= 2 and b.ndim == 2 and not b._scheme.is_affine and b._scales.shape[0] == 1:
            # scales shared along K: the transposed weight's row, dequantized in the product
            return _weight_linear(a, b._values.transpose(), b._scales.transpose())
        if a.ndim >= 2 and b.ndim >= 2 and not b._scheme.is_affine and b._scales.shape[-2] == 1:
            x: Tensor = a  # a batched quantized operand: (x @ values) * s, values in x's dtype
            dt = x.dtype
            return (x @ b._values.cast(dt)) * _as(b._scales, dt)
        return a @ b.dequantize()
    if a.ndim >= 2 and b.ndim >= 2 and not a._scheme.is_affine and a._scales.shape[-1] == 1:
        y: Tensor = b
        dt = y.dtype
        return (a._values.cast(dt) @ y) * _as(a._scales, dt)
    return a.dequantize() @ b


def _weight_linear(x: Tensor, values: Tensor, scales: Tensor) -> Tensor:
    """``x`` (*, K) times int8 ``values`` (N, K) with ``scales`` (N, 1): the
    ``int8_weight_linear`` row, dequantized inside the product."""
    return apply(_WEIGHT_LINEAR, (x, values, scales), {})


def _as(t: Tensor, dt: Any) -> Tensor:
    return t if t.dtype is dt else t.cast(dt)


def _int_product(a: QuantizedTensor, b: QuantizedTensor) -> Tensor:
    """int8 x int8 -> int32 sums scaled to float32 (the backend's ``int8_matmul_scaled``)."""
    from .dispatch import wrap

    va, vb = a._values, b._values
    if va._hardware is not vb._hardware:
        from ..errors import DeviceError

        raise DeviceError(
            f"matmul: operands are on {va._hardware} and {vb._hardware}. Move one with "
            ".to_device(device)."
        )
    dev = va._hardware
    sa, sb = a._scales._data, b._scales._data
    out = wrap(type(va), dev.b.int8_matmul_scaled(va._data, vb._data, sa, sb), dev)
    dt = promote(a._float, b._float)
    out = out if dt is float32 else out.cast(dt)
    strategy = a._strategy or b._strategy
    if strategy is not None:
        out = out.autodiff().with_gradient_checkpointing_strategy(strategy)
    return out


def linear(x: Operand, weight: Operand, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` where ``x`` or ``weight`` (out_features, in_features) is
    quantized; a weight quantized per output channel (``("channel", 0)``) keeps the int8 path."""
    _check_operand("linear", x)
    _check_operand("linear", weight)
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: expected weight (out_features, in_features) with in_features = the "
            f"input's last size, got input {x.shape} and weight {weight.shape}. The weight is "
            "[out, in], as in PyTorch."
        )
    if bias is not None:
        if isinstance(bias, QuantizedTensor):
            bias = bias.dequantize()
        if not isinstance(bias, TensorBase) or bias.shape != (weight.shape[0],):
            got = bias.shape if isinstance(bias, TensorBase) else type(bias).__name__
            raise ShapeError(f"linear: expected bias of shape ({weight.shape[0]},), got {got}.")
    if (
        isinstance(weight, QuantizedTensor)
        and not isinstance(x, QuantizedTensor)
        and x.ndim >= 2
        and not weight._scheme.is_affine
        and weight._scales.shape[1] == 1
    ):  # a weight quantized per output channel (or per tensor): no transposed copy of it
        out = _weight_linear(x, weight._values, weight._scales)
        return out if bias is None else out + bias
    w_t = weight.transpose()
    if isinstance(x, QuantizedTensor) and x.ndim != 2:
        x = x.dequantize()
    out = matmul(x, w_t)
    return out if bias is None else out + bias


def embedding(indices: Tensor, weight: QuantizedTensor) -> Tensor:
    """Rows of a quantized ``weight`` (num_embeddings, D) picked by int ``indices`` -> (*, D),
    dequantized (only the picked rows are)."""
    if not isinstance(indices, TensorBase):
        raise DTypeError(f"embedding: expected a Tensor of indices, got {type(indices).__name__}.")
    dt = indices.dtype
    if dt.is_float or dt.is_bool:
        raise DTypeError(f"embedding: expected int indices, got {dt.name}. Convert with .int().")
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding: expected a 2-D weight (num_embeddings, dim), got shape {weight.shape}."
        )
    flat = indices.reshape((-1,)) if indices.ndim != 1 else indices
    rows = weight.select(0, flat).dequantize()
    return rows.reshape((*indices.shape, weight.shape[1]))
