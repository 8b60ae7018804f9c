"""Learning-rate schedulers (``em.optim.lr``): iterators of floats.

Each scheduler yields the rate for step 0, 1, 2, ... and can save and restore its position
(``state()`` / ``load_state()``) so a training record resumes the schedule.

A "step" is one ``next()``. Schedulers built with ``per_epoch=True`` (``Step``, ``MultiStep``,
``Exponential``, the cosines: PyTorch users step these once per epoch) count epochs instead:
``em.train.Learner`` advances them once per epoch, and uses that rate for every optimizer step
of the epoch; in a hand-written loop, call ``next()`` once per epoch. ``ReduceOnPlateau`` moves
on the metric you ``report`` (see its docstring). PyTorch names: ``StepLR`` -> ``Step``,
``MultiStepLR`` -> ``MultiStep``, ``ExponentialLR`` -> ``Exponential``, ``CosineAnnealingLR`` ->
``CosineAnnealing(periodic=True)``, ``OneCycleLR`` -> ``OneCycle``,
``CosineAnnealingWarmRestarts`` -> ``CosineAnnealingWarmRestarts``, ``ReduceLROnPlateau`` ->
``ReduceOnPlateau``.

Example:
    >>> sched = Composed([(Linear(0.0, 1e-3, 100), 100), (CosineAnnealing(1e-3, 0.0, 900), 900)])
    >>> lr = next(sched)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ShapeError


class LrScheduler(Iterator[float]):
    """Base class: ``next()`` returns the rate at the current step and advances.

    ``per_epoch``: the schedule counts epochs (``Learner`` calls ``next()`` once per epoch)."""

    def __init__(self, *, per_epoch: bool = False) -> None:
        self.step = 0
        self.per_epoch = bool(per_epoch)

    def rate(self, step: int) -> float:
        """The rate at ``step`` (pure; does not move the scheduler)."""
        raise NotImplementedError(f"{type(self).__name__}.rate: subclasses define the schedule.")

    def __iter__(self) -> LrScheduler:
        return self

    def __next__(self) -> float:
        value = self.rate(self.step)
        self.step += 1
        return value

    def state(self) -> dict[str, Any]:
        """JSON-serialisable position, for training records."""
        return {"step": self.step}

    def load_state(self, state: dict[str, Any]) -> None:
        """Resume from ``state()``."""
        self.step = int(state["step"])


def _positive(op: str, name: str, value: int) -> int:
    if value <= 0:
        raise ShapeError(f"{op}: expected {name} > 0, got {value}.")
    return int(value)


class Constant(LrScheduler):
    """The same rate at every step."""

    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = float(lr)

    def rate(self, step: int) -> float:
        return self.lr


class Linear(LrScheduler):
    """From ``initial`` to ``final`` linearly over ``num_iters`` steps, then ``final``."""

    def __init__(self, initial: float, final: float, num_iters: int) -> None:
        super().__init__()
        self.initial, self.final = float(initial), float(final)
        self.num_iters = _positive("Linear", "num_iters", num_iters)

    def rate(self, step: int) -> float:
        frac = min(step, self.num_iters) / self.num_iters
        return self.initial + (self.final - self.initial) * frac


class CosineAnnealing(LrScheduler):
    """Half a cosine from ``initial`` down to ``min_lr`` over ``num_iters`` steps, then ``min_lr``.

    ``lr = min_lr + (initial - min_lr) * (1 + cos(pi * step / num_iters)) / 2``. With
    ``periodic=True`` the cosine goes on past ``num_iters`` (back up to ``initial`` at
    ``2 num_iters``, and so on), as ``torch.optim.lr_scheduler.CosineAnnealingLR`` does.
    """

    def __init__(
        self,
        initial: float,
        min_lr: float = 0.0,
        num_iters: int = 1000,
        *,
        periodic: bool = False,
        per_epoch: bool = False,
    ) -> None:
        super().__init__(per_epoch=per_epoch)
        self.initial, self.min_lr = float(initial), float(min_lr)
        self.num_iters = _positive("CosineAnnealing", "num_iters", num_iters)
        self.periodic = bool(periodic)

    def rate(self, step: int) -> float:
        n = step if self.periodic else min(step, self.num_iters)
        frac = n / self.num_iters
        return self.min_lr + (self.initial - self.min_lr) * (1.0 + math.cos(math.pi * frac)) / 2


class Exponential(LrScheduler):
    """``initial * gamma ** step`` (``ExponentialLR``; ``per_epoch=True`` to count epochs)."""

    def __init__(self, initial: float, gamma: float, *, per_epoch: bool = False) -> None:
        super().__init__(per_epoch=per_epoch)
        self.initial, self.gamma = float(initial), float(gamma)

    def rate(self, step: int) -> float:
        return self.initial * self.gamma**step


class Step(LrScheduler):
    """``initial * gamma ** (step // step_size)`` (``StepLR``; ``per_epoch=True`` to count
    epochs)."""

    def __init__(
        self, initial: float, step_size: int, gamma: float = 0.1, *, per_epoch: bool = False
    ) -> None:
        super().__init__(per_epoch=per_epoch)
        self.initial, self.gamma = float(initial), float(gamma)
        self.step_size = _positive("Step", "step_size", step_size)

    def rate(self, step: int) -> float:
        return self.initial * self.gamma ** (step // self.step_size)


class MultiStep(LrScheduler):
    """``initial * gamma ** (number of milestones <= step)`` (``MultiStepLR``; ``per_epoch=True``
    to count epochs). A milestone listed twice counts twice, as in PyTorch.

    Example:
        >>> sched = MultiStep(0.1, milestones=[30, 80], gamma=0.1, per_epoch=True)
    """

    def __init__(
        self,
        initial: float,
        milestones: Sequence[int],
        gamma: float = 0.1,
        *,
        per_epoch: bool = False,
    ) -> None:
        super().__init__(per_epoch=per_epoch)
        self.initial, self.gamma = float(initial), float(gamma)
        bad = [m for m in milestones if isinstance(m, bool) or not isinstance(m, int) or m < 0]
        if bad:
            raise ShapeError(f"MultiStep: expected milestones to be ints >= 0, got {bad}.")
        self.milestones = sorted(int(m) for m in milestones)

    def rate(self, step: int) -> float:
        return self.initial * self.gamma ** bisect.bisect_right(self.milestones, step)


class Noam(LrScheduler):
    """The Transformer schedule, with ``n = step + 1``:
    ``factor * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5)``."""

    def __init__(self, d_model: int, warmup_steps: int, factor: float = 1.0) -> None:
        super().__init__()
        self.d_model = _positive("Noam", "d_model", d_model)
        self.warmup_steps = _positive("Noam", "warmup_steps", warmup_steps)
        self.factor = float(factor)

    def rate(self, step: int) -> float:
        n = step + 1
        return self.factor * self.d_model**-0.5 * min(n**-0.5, n * self.warmup_steps**-1.5)


class Composed(LrScheduler):
    """Schedulers one after another: ``[(warmup, 100), (decay, 900)]``.

    Each part sees its own step count from 0; after the last part's length, the last part
    continues.
    """

    def __init__(self, parts: Sequence[tuple[LrScheduler, int]]) -> None:
        super().__init__()
        if not parts:
            raise ShapeError(
                "Composed: expected at least one (scheduler, num_steps) part, got none."
            )
        self.parts = [(s, _positive("Composed", "num_steps", n)) for s, n in parts]

    def rate(self, step: int) -> float:
        start = 0
        for sched, n in self.parts[:-1]:
            if step < start + n:
                return sched.rate(step - start)
            start += n
        return self.parts[-1][0].rate(step - start)


# the schedulers with their own module (they build on LrScheduler above)
from .lr_cycles import CosineAnnealingWarmRestarts as CosineAnnealingWarmRestarts  # noqa: E402
from .lr_cycles import OneCycle as OneCycle  # noqa: E402
from .lr_plateau import ReduceOnPlateau as ReduceOnPlateau  # noqa: E402
