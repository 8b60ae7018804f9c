"""Elementwise methods of ``Tensor`` (``ElementwiseMethods``, a mixin): arithmetic and its
operators, comparisons and logic, math functions, rounding and dtype casts.

Each dispatches one registry row; binary operands broadcast, scalars are Python numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..dtype import as_dtype, bool_, float32, int64
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .base import AnyTensor
from .dispatch import apply, apply1, as_scalar, binary, scalar
from .dispatch import cast as _cast

if TYPE_CHECKING:
    from .tensor import Tensor

_ADD, _SUB, _MUL, _DIV = OPS["add"], OPS["sub"], OPS["mul"], OPS["div"]
_ADD_S, _SUB_S, _RSUB_S = OPS["add_scalar"], OPS["sub_scalar"], OPS["rsub_scalar"]
_MUL_S, _DIV_S, _RDIV_S = OPS["mul_scalar"], OPS["div_scalar"], OPS["rdiv_scalar"]


def _unary(name: str) -> Any:
    spec = OPS[name]

    def method(self: Tensor) -> Tensor:
        return apply1(spec, self, {})

    method.__name__ = name
    method.__doc__ = f"Elementwise ``{name}`` (differentiable)."
    return method


def _float_unary(name: str) -> Any:
    spec = OPS[name]

    def method(self: Tensor) -> Tensor:
        x = self if self.dtype.is_float else _cast(self, float32)
        return apply(spec, (x,), {})

    method.__name__ = name
    method.__doc__ = f"Elementwise ``{name}``; int and bool inputs are computed in float32."
    return method


neg = _unary("neg")
exp = _unary("exp")
log = _unary("log")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
erf = _unary("erf")
abs = _unary("abs")
sign = _unary("sign")
recip = _float_unary("recip")


def powf(self: Tensor, exponent: Tensor) -> Tensor:
    """``self ** exponent`` elementwise, both tensors (float)."""
    return binary(OPS["powf"], self, exponent)


def powf_scalar(self: Tensor, p: float) -> Tensor:
    """``self ** p`` for a float ``p`` (an int tensor is computed in float32)."""
    return scalar(OPS["powf_scalar"], self, float(as_scalar("powf_scalar", p)))


def powi_scalar(self: Tensor, n: int) -> Tensor:
    """``self ** n`` for an int ``n``; keeps the dtype."""
    v = as_scalar("powi_scalar", n)
    if not isinstance(v, int) or isinstance(v, bool):
        raise DTypeError(f"powi_scalar: expected an int exponent, got {n!r}; use powf_scalar.")
    if not self.dtype.is_bool:  # the exponent fits an int32 tensor; a float16 one rounds it
        v = checks.fit("powi_scalar", v, self.dtype)
    if v < 0 and not self.dtype.is_float:
        raise DTypeError(
            f"powi_scalar: an {self.dtype.name} tensor has no negative powers (got exponent {v}); "
            "convert first with .float()."
        )
    return apply(OPS["powi_scalar"], (self,), {"value": v})


def clamp(self: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Limit values to ``[min, max]`` (either bound may be ``None``)."""
    if min is None and max is None:
        raise ShapeError("clamp: expected at least one of min and max, got neither.")
    lo = None if min is None else as_scalar("clamp", min)
    hi = None if max is None else as_scalar("clamp", max)
    x = self
    if isinstance(lo, float) or isinstance(hi, float):
        x = x if x.dtype.is_float else _cast(x, float32)
    dt = x.dtype  # int bounds must fit an int tensor; float bounds beyond a float's range: inf
    lo = None if lo is None else checks.fit("clamp", lo, dt)
    hi = None if hi is None else checks.fit("clamp", hi, dt)
    return apply(OPS["clamp"], (x,), {"min": lo, "max": hi})


def clamp_min(self: Tensor, min: float) -> Tensor:
    return self.clamp(min=min)


def clamp_max(self: Tensor, max: float) -> Tensor:
    return self.clamp(max=max)


def mask_where(self: Tensor, mask: Tensor, values: Tensor) -> Tensor:
    """``values`` where ``mask`` is true, else ``self`` (shapes broadcast)."""
    from . import checks

    mask = _bool_mask("mask_where", mask)
    checks.broadcast_shapes("mask_where", self.shape, mask.shape)
    checks.broadcast_shapes("mask_where", self.shape, values.shape)
    x, v = self, values
    if x.dtype is not v.dtype:
        from ..dtype import promote

        dt = promote(x.dtype, v.dtype)
        x, v = _cast(x, dt), _cast(v, dt)
    return apply(OPS["mask_where"], (x, mask, v), {})


def mask_fill(self: Tensor, mask: Tensor, value: float) -> Tensor:
    """``value`` where ``mask`` is true, else ``self``."""
    from . import checks

    mask = _bool_mask("mask_fill", mask)
    checks.broadcast_shapes("mask_fill", self.shape, mask.shape)
    v = as_scalar("mask_fill", value)
    x = self if not (isinstance(v, float) and not self.dtype.is_float) else _cast(self, float32)
    v = checks.fit("mask_fill", v, x.dtype)
    return apply(OPS["mask_fill"], (x, mask), {"value": v})


def _bool_mask(op: str, mask: Any) -> Tensor:
    from ..errors import DTypeError

    if not isinstance(mask, AnyTensor) or not mask.dtype.is_bool:
        got = mask.dtype.name if isinstance(mask, AnyTensor) else type(mask).__name__
        raise DTypeError(
            f"{op}: expected a bool mask tensor, got {got}. Build one with a comparison (t > 0)."
        )
    return mask


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


def add(self: Tensor, other: Tensor | float) -> Tensor:
    if isinstance(other, AnyTensor):
        return binary(_ADD, self, other)
    return scalar(_ADD_S, self, other)


def sub(self: Tensor, other: Tensor | float) -> Tensor:
    if isinstance(other, AnyTensor):
        return binary(_SUB, self, other)
    return scalar(_SUB_S, self, other)


def mul(self: Tensor, other: Tensor | float) -> Tensor:
    if isinstance(other, AnyTensor):
        return binary(_MUL, self, other)
    return scalar(_MUL_S, self, other)


def div(self: Tensor, other: Tensor | float) -> Tensor:
    """True division; int operands give float32 (like PyTorch)."""
    x = self if self.dtype.is_float else _cast(self, float32)
    if isinstance(other, AnyTensor):
        y = other if other.dtype.is_float else _cast(other, float32)
        return binary(_DIV, x, y)
    return scalar(_DIV_S, x, other)


def add_scalar(self: Tensor, value: float) -> Tensor:
    return scalar(_ADD_S, self, value)


def sub_scalar(self: Tensor, value: float) -> Tensor:
    return scalar(_SUB_S, self, value)


def mul_scalar(self: Tensor, value: float) -> Tensor:
    return scalar(_MUL_S, self, value)


def div_scalar(self: Tensor, value: float) -> Tensor:
    return self.div(as_scalar("div_scalar", value))


def __radd__(self: Tensor, other: float) -> Tensor:
    return scalar(_ADD_S, self, other)


def __rsub__(self: Tensor, other: float) -> Tensor:
    return scalar(_RSUB_S, self, other)


def __rmul__(self: Tensor, other: float) -> Tensor:
    return scalar(_MUL_S, self, other)


def __rtruediv__(self: Tensor, other: float) -> Tensor:
    x = self if self.dtype.is_float else _cast(self, float32)
    return scalar(_RDIV_S, x, other)


def __pow__(self: Tensor, other: Tensor | float) -> Tensor:
    if isinstance(other, AnyTensor):
        return self.powf(other)
    value = as_scalar("pow", other)
    if isinstance(value, int) and not isinstance(value, bool):
        return self.powi_scalar(value)
    return self.powf_scalar(value)


def __rpow__(self: Tensor, other: float) -> Tensor:
    base = self.full_like(
        self if self.dtype.is_float else _cast(self, float32), as_scalar("pow", other)
    )
    return base.powf(self)


# comparisons give bool tensors (and keep the autodiff context, with no node)
def _compare(self: Tensor, name: str, other: Any) -> Tensor:
    if isinstance(other, AnyTensor):
        return binary(OPS[name], self, other)
    v = as_scalar(name, other)
    if type(v) is int and not -(1 << 31) <= v < 1 << 31:  # may not fit an int32 tensor
        v = checks.fit(name, v, self.dtype)
    return apply(OPS[name + "_elem"], (self,), {"value": v})


def equal(self: Tensor, other: Tensor | float) -> Tensor:
    return self._compare("equal", other)


def not_equal(self: Tensor, other: Tensor | float) -> Tensor:
    return self._compare("not_equal", other)


def greater(self: Tensor, other: Tensor | float) -> Tensor:
    return self._compare("greater", other)


def greater_equal(self: Tensor, other: Tensor | float) -> Tensor:
    return self._compare("greater_equal", other)


def lower(self: Tensor, other: Tensor | float) -> Tensor:
    return self._compare("lower", other)


def lower_equal(self: Tensor, other: Tensor | float) -> Tensor:
    return self._compare("lower_equal", other)


def equal_elem(self: Tensor, value: float) -> Tensor:
    return self._compare("equal", value)


def greater_elem(self: Tensor, value: float) -> Tensor:
    return self._compare("greater", value)


def lower_elem(self: Tensor, value: float) -> Tensor:
    return self._compare("lower", value)


def not_equal_elem(self: Tensor, value: float) -> Tensor:
    return self._compare("not_equal", value)


def greater_equal_elem(self: Tensor, value: float) -> Tensor:
    return self._compare("greater_equal", value)


def lower_equal_elem(self: Tensor, value: float) -> Tensor:
    return self._compare("lower_equal", value)


def __invert__(self: Tensor) -> Tensor:
    if not self.dtype.is_bool:
        raise DTypeError(f"~: expected a bool tensor, got {self.dtype.name}.")
    return apply(OPS["logical_not"], (self,), {})


def __and__(self: Tensor, other: Tensor) -> Tensor:
    return binary(OPS["logical_and"], self.bool(), other.bool())


def __or__(self: Tensor, other: Tensor) -> Tensor:
    return binary(OPS["logical_or"], self.bool(), other.bool())


def cast(self: Tensor, dtype: Any) -> Tensor:
    """Convert to ``dtype`` (differentiable between float dtypes)."""
    return _cast(self, as_dtype(dtype))


def _float(self: Tensor) -> Tensor:
    """float32 (like PyTorch's ``.float()``)."""
    return _cast(self, float32)


def _int(self: Tensor) -> Tensor:
    """int64 (floats truncate toward zero)."""
    return _cast(self, int64)


def _bool(self: Tensor) -> Tensor:
    return _cast(self, bool_)


class ElementwiseMethods:
    """Arithmetic, comparisons, logic, math, rounding and casts."""

    __slots__ = ()
    __hash__ = object.__hash__  # defining __eq__ here would otherwise unset it

    neg = neg
    exp = exp
    log = log
    log1p = log1p
    sqrt = sqrt
    sin = sin
    cos = cos
    tanh = tanh
    erf = erf
    abs = abs
    sign = sign
    recip = recip
    floor = floor
    ceil = ceil
    round = round
    powf = powf
    powf_scalar = powf_scalar
    powi_scalar = powi_scalar
    clamp = clamp
    clamp_min = clamp_min
    clamp_max = clamp_max
    mask_where = mask_where
    mask_fill = mask_fill
    __neg__ = neg
    __abs__ = abs
    add = add
    sub = sub
    mul = mul
    div = div
    add_scalar = add_scalar
    sub_scalar = sub_scalar
    mul_scalar = mul_scalar
    div_scalar = div_scalar
    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div
    __radd__ = __radd__
    __rsub__ = __rsub__
    __rmul__ = __rmul__
    __rtruediv__ = __rtruediv__
    __pow__ = __pow__
    __rpow__ = __rpow__
    _compare = _compare
    equal = equal
    not_equal = not_equal
    greater = greater
    greater_equal = greater_equal
    lower = lower
    lower_equal = lower_equal
    equal_elem = equal_elem
    greater_elem = greater_elem
    lower_elem = lower_elem
    not_equal_elem = not_equal_elem
    greater_equal_elem = greater_equal_elem
    lower_equal_elem = lower_equal_elem
    __eq__ = equal  # type: ignore[assignment]
    __ne__ = not_equal  # type: ignore[assignment]
    __gt__ = greater
    __ge__ = greater_equal
    __lt__ = lower
    __le__ = lower_equal
    __invert__ = __invert__
    __and__ = __and__
    __or__ = __or__
    cast = cast
    float = _float
    int = _int
    bool = _bool
