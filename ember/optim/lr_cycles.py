"""Cyclic schedules: ``OneCycle`` and ``CosineAnnealingWarmRestarts`` (in ``em.optim.lr``)."""

from __future__ import annotations

import math

from ..errors import ShapeError
from .lr import LrScheduler, _positive


def _cos_anneal(start: float, end: float, frac: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * frac) + 1.0)


def _linear_anneal(start: float, end: float, frac: float) -> float:
    return (end - start) * frac + start


class OneCycle(LrScheduler):
    """The 1cycle policy, as ``torch.optim.lr_scheduler.OneCycleLR``: ``total_steps`` rates
    from ``max_lr / div_factor`` up to ``max_lr`` over the first ``pct_start`` of the steps,
    then down to ``max_lr / div_factor / final_div_factor``; ``three_phase`` comes back to the
    initial rate first, symmetrically, and anneals to the minimum in a third phase.
    ``anneal_strategy``: ``"cos"`` or ``"linear"``. The iterator ends after ``total_steps``
    rates (PyTorch raises past them). Momentum is not cycled (ember schedules rates only).

    Example:
        >>> sched = OneCycle(max_lr=0.1, total_steps=epochs * len(loader))
    """

    def __init__(
        self,
        max_lr: float,
        total_steps: int,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
    ) -> None:
        super().__init__()
        op = "OneCycle"
        self.total_steps = _positive(op, "total_steps", total_steps)
        if not 0.0 <= pct_start <= 1.0:
            raise ShapeError(f"{op}: expected 0 <= pct_start <= 1, got {pct_start!r}.")
        if anneal_strategy not in ("cos", "linear"):
            raise ShapeError(
                f"{op}: expected anneal_strategy 'cos' or 'linear', got {anneal_strategy!r}."
            )
        if div_factor <= 0 or final_div_factor <= 0:
            raise ShapeError(
                f"{op}: expected div_factor > 0 and final_div_factor > 0, got {div_factor!r} "
                f"and {final_div_factor!r}."
            )
        self.max_lr = float(max_lr)
        self.anneal = _cos_anneal if anneal_strategy == "cos" else _linear_anneal
        initial = self.max_lr / div_factor
        low = initial / final_div_factor
        up = float(pct_start * self.total_steps) - 1.0
        # (last step of the phase, rate at its start, rate at its end)
        if three_phase:
            self.phases = [
                (up, initial, self.max_lr),
                (float(2 * pct_start * self.total_steps) - 2.0, self.max_lr, initial),
                (self.total_steps - 1.0, initial, low),
            ]
        else:
            self.phases = [(up, initial, self.max_lr), (self.total_steps - 1.0, self.max_lr, low)]

    def rate(self, step: int) -> float:
        if not 0 <= step < self.total_steps:
            raise ShapeError(
                f"OneCycle: expected a step in [0, {self.total_steps}), got {step}. Build it with "
                "total_steps = epochs * steps per epoch."
            )
        start = 0.0
        last = len(self.phases) - 1
        for i, (end, lr_start, lr_end) in enumerate(self.phases):
            if step <= end or i == last:
                return self.anneal(lr_start, lr_end, (step - start) / (end - start))
            start = end
        raise AssertionError("unreachable: the last phase always answers")

    def __next__(self) -> float:
        if self.step >= self.total_steps:
            raise StopIteration
        return super().__next__()


class CosineAnnealingWarmRestarts(LrScheduler):
    """SGDR, as ``torch.optim.lr_scheduler.CosineAnnealingWarmRestarts``: a cosine from
    ``initial`` to ``eta_min`` over ``T_0`` steps, then a restart at ``initial`` with a period
    ``T_mult`` times longer each time. ``per_epoch=True`` counts epochs (PyTorch's usual use).

    ``lr = eta_min + (initial - eta_min) (1 + cos(pi T_cur / T_i)) / 2``.

    Example:
        >>> sched = CosineAnnealingWarmRestarts(0.1, T_0=10, T_mult=2, eta_min=1e-4)
    """

    def __init__(
        self,
        initial: float,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        *,
        per_epoch: bool = False,
    ) -> None:
        super().__init__(per_epoch=per_epoch)
        op = "CosineAnnealingWarmRestarts"
        self.initial, self.eta_min = float(initial), float(eta_min)
        self.T_0 = _positive(op, "T_0", T_0)
        if isinstance(T_mult, bool) or not isinstance(T_mult, int) or T_mult < 1:
            raise ShapeError(f"{op}: expected T_mult to be an int >= 1, got {T_mult!r}.")
        self.T_mult = T_mult

    def rate(self, step: int) -> float:
        t_cur, t_i = step, self.T_0
        if self.T_mult == 1:
            t_cur = step % t_i
        else:
            while t_cur >= t_i:  # periods grow geometrically: few iterations
                t_cur -= t_i
                t_i *= self.T_mult
        return (
            self.eta_min
            + (self.initial - self.eta_min) * (1.0 + math.cos(math.pi * t_cur / t_i)) / 2.0
        )
