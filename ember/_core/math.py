"""Elementwise math methods of ``Tensor`` (a mixin; each dispatches through the registry)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dtype import float32
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .dispatch import apply, apply1, as_scalar, binary, cast, scalar

if TYPE_CHECKING:
    from .tensor import Tensor


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
        x = self if self.dtype.is_float else cast(self, float32)
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
        x = x if x.dtype.is_float else cast(x, float32)
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
        x, v = cast(x, dt), cast(v, dt)
    return apply(OPS["mask_where"], (x, mask, v), {})


def mask_fill(self: Tensor, mask: Tensor, value: float) -> Tensor:
    """``value`` where ``mask`` is true, else ``self``."""
    from . import checks

    mask = _bool_mask("mask_fill", mask)
    checks.broadcast_shapes("mask_fill", self.shape, mask.shape)
    v = as_scalar("mask_fill", value)
    x = self if not (isinstance(v, float) and not self.dtype.is_float) else cast(self, float32)
    v = checks.fit("mask_fill", v, x.dtype)
    return apply(OPS["mask_fill"], (x, mask), {"value": v})


def _bool_mask(op: str, mask: Any) -> Tensor:
    from ..errors import DTypeError
    from .tensor import Tensor

    if not isinstance(mask, Tensor) or not mask.dtype.is_bool:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(
            f"{op}: expected a bool mask tensor, got {got}. Build one with a comparison (t > 0)."
        )
    return mask
