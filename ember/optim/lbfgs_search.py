"""The strong-Wolfe line search of ``LBFGS(line_search_fn="strong_wolfe")``.

Bracketing then zooming with cubic interpolation (Nocedal & Wright, algorithms 3.5 and 3.6),
with the safeguards PyTorch's ``LBFGS`` uses, so both take the same steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .._core.tensor import Tensor

# evaluate(t) -> (loss, flat gradient) at x + t d, leaving the parameters at x
Evaluate = Callable[[float], tuple[float, Tensor]]


def cubic_min(
    x1: float,
    f1: float,
    g1: float,
    x2: float,
    f2: float,
    g2: float,
    bounds: tuple[float, float] | None = None,
) -> float:
    """The minimiser of the cubic through two points with values and slopes, clamped to
    ``bounds`` (default: between the points); the middle of the bounds when the cubic has no
    minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
    return min(max(at, lo), hi)


class _Point:
    """A trial step: its size, loss, gradient and slope along the direction."""

    __slots__ = ("f", "g", "gtd", "t")

    def __init__(self, t: float, f: float, g: Tensor, gtd: float) -> None:
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def strong_wolfe(
    evaluate: Evaluate,
    d: Tensor,
    t: float,
    f: float,
    g: Tensor,
    gtd: float,
    max_ls: int,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
) -> tuple[float, Tensor, float, int]:
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions (sufficient decrease ``c1``,
    curvature ``c2``), from the start point's loss ``f``, gradient ``g`` and slope ``gtd``,
    within ``max_ls`` evaluations. Returns the loss, gradient and step of the chosen point and
    the number of evaluations."""

    def at(step: float) -> _Point:
        fv, gv = evaluate(step)
        return _Point(step, fv, gv, _dot(gv, d))

    def decrease_ok(p: _Point) -> bool:
        return not p.f > f + c1 * p.t * gtd

    def curvature_ok(p: _Point) -> bool:
        return abs(p.gtd) <= -c2 * gtd

    d_norm = d.abs().max().item()
    prev = _Point(0.0, f, g, gtd)
    new = at(t)
    evals, ls_iter = 1, 0
    bracket: list[_Point] | None = None
    # phase 1: grow the step until an interval holds an acceptable point
    while ls_iter < max_ls:
        if not decrease_ok(new) or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if curvature_ok(new):
            return new.f, new.g, new.t, evals
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        bounds = (new.t + 0.01 * (new.t - prev.t), new.t * 10.0)
        step = cubic_min(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd, bounds)
        prev, new = new, at(step)
        evals += 1
        ls_iter += 1
    if bracket is None:  # out of evaluations: the start and the last trial
        bracket = [_Point(0.0, f, g, gtd), new]
        low = 0 if bracket[0].f <= bracket[1].f else 1
        return bracket[low].f, bracket[low].g, bracket[low].t, evals
    # phase 2: shrink the interval around an acceptable point
    low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
    stalled = False
    while ls_iter < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_norm < tolerance_change:
            break
        step = cubic_min(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        margin = 0.1 * (top - bottom)
        if min(top - step, step - bottom) < margin:  # too close to an end of the interval
            if stalled or step >= top or step <= bottom:
                step = top - margin if abs(step - top) < abs(step - bottom) else bottom + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        new = at(step)
        evals += 1
        ls_iter += 1
        if not decrease_ok(new) or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
            continue
        if curvature_ok(new):
            bracket[low] = new
            break
        if new.gtd * (bracket[high].t - bracket[low].t) >= 0:
            bracket[high] = bracket[low]
        bracket[low] = new
    best = bracket[low]
    return best.f, best.g, best.t, evals


def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum().item())
