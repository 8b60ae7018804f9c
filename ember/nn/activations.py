"""More activation functions of ``em.nn.functional``, with PyTorch's arguments and results.

Each is a composition of registry rows (masks, ``exp``, ``softplus``, ``clamp``, ``tanh``), so it
is differentiable, checkpointed as memory-bound and differentiable twice with no rule of its own.
At the kinks the gradients are PyTorch's: ``leaky_relu`` and ``elu`` take the negative branch's
slope at 0, ``hardswish`` and ``hardsigmoid`` the flat outer branches' at -3 and 3.
"""

from __future__ import annotations

import math

from .._core.dispatch import apply
from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from .losses import _float

_SOFTPLUS = OPS["softplus"]


def _number(op: str, name: str, v: object, *, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise DTypeError(f"{op}: expected a finite number for {name}, got {v!r}.")
    if positive and v <= 0:
        raise ShapeError(f"{op}: expected {name} > 0, got {v!r}.")
    return float(v)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``.

    Example:
        >>> leaky_relu(em.tensor([-2.0, 3.0]), 0.1).tolist()
        [-0.2, 3.0]
    """
    x = _float("leaky_relu", x)
    slope = _number("leaky_relu", "negative_slope", negative_slope)
    return (x * slope).mask_where(x > 0, x)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``.

    Example:
        >>> round(elu(em.tensor([-1.0])).item(), 4)
        -0.6321
    """
    x = _float("elu", x)
    a = _number("elu", "alpha", alpha)
    negative = x.clamp(max=0.0)  # exp of the negative part only: no overflow for large x
    return ((negative.exp() - 1.0) * a).mask_where(x > 0, x)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``.

    Example:
        >>> round(softplus(em.tensor([0.0])).item(), 4)
        0.6931
    """
    x = _float("softplus", x)
    b = _number("softplus", "beta", beta, positive=True)
    t = _number("softplus", "threshold", threshold)
    z = x if b == 1.0 else x * b
    out = apply(_SOFTPLUS, (z,), {})
    if b != 1.0:
        out = out / b
    return out.mask_where(z > t, x)


def mish(x: Tensor) -> Tensor:
    """``x * tanh(softplus(x))``.

    Example:
        >>> round(mish(em.tensor([1.0])).item(), 4)
        0.8651
    """
    x = _float("mish", x)
    return x * apply(_SOFTPLUS, (x,), {}).tanh()


def hardswish(x: Tensor) -> Tensor:
    """``x * relu6(x + 3) / 6``: 0 below -3, ``x`` above 3.

    Example:
        >>> hardswish(em.tensor([0.0, 4.0])).tolist()
        [0.0, 4.0]
    """
    x = _float("hardswish", x)
    return (x * (x + 3.0) / 6.0).mask_fill(x <= -3.0, 0.0).mask_where(x >= 3.0, x)


def hardsigmoid(x: Tensor) -> Tensor:
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3."""
    x = _float("hardsigmoid", x)
    return ((x + 3.0) / 6.0).mask_fill(x <= -3.0, 0.0).mask_fill(x >= 3.0, 1.0)
