"""Floor division and remainder rows (``//`` and ``%``), as Python and PyTorch define them.

``floor_divide(x, y)`` rounds ``x / y`` toward minus infinity; ``remainder(x, y)`` is
``x - floor_divide(x, y) * y`` and takes the sign of ``y``. Both are exact for ints. The quotient
is piecewise constant: its gradient is zero (PyTorch defines none). The remainder's gradient is
``grad`` for ``x`` and ``-grad * floor_divide(x, y)`` for ``y``.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, _need, defop


def _examples(rng: Any) -> Examples:
    """Mixed signs, divisors away from 0 and quotients away from integer steps (a finite
    difference straddling a step of the floor would see a jump)."""

    def divisor(shape: tuple[int, ...]) -> Any:
        return rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)

    cases: Examples = []
    for xs, ys in (((3, 4), (3, 4)), ((2, 3), (3,)), ((4,), ())):
        y = divisor(ys)
        q = rng.integers(-3, 4, size=xs) + rng.uniform(0.2, 0.8, size=xs)
        cases.append(((q * y, y), {}))
    return cases


@defop(
    "floor_divide",
    arity=2,
    cost=Cost.MEMORY_BOUND,
    dtypes=Domain.NUMERIC,
    examples=_examples,
    smooth=False,
)
def floor_divide_backward(ctx: Any, grad: Any) -> Grads:
    zero = ctx.b.zeros_like(grad)
    return zero, (zero if _need(ctx, 1) else None)


@defop(
    "remainder",
    arity=2,
    cost=Cost.MEMORY_BOUND,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_examples,
    smooth=False,
)
def remainder_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    gy = ctx.b.neg(ctx.b.mul(grad, ctx.b.floor_divide(x, y))) if _need(ctx, 1) else None
    return grad, gy
