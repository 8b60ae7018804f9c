"""The learning-rate schedule of an ``ember train`` run, continued smoothly across resumes.

A run's rate warms up linearly for ``warmup`` steps and then decays by a half cosine to
``min_lr`` at its planned last step. When a resume changes the planned number of steps
(``--epochs`` or ``--iters``), the curve is continued, not restarted: from the resumed step on,
the rate decays by a half cosine from the value the run had reached to ``min_lr`` at the new
last step (a resume inside the warm-up keeps warming up, then decays over the new total). The
plan (the first total and each change) is kept in ``config.json`` under ``"lr_schedule"``, so
every later resume rebuilds the same curve. ``ContinueSchedule`` makes the change once the
record is restored (``load_state`` itself stays a plain position restore).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..optim.lr import CosineAnnealing, LrScheduler
from ..train.callbacks import Callback
from . import tasks


class RunSchedule(LrScheduler):
    """Warm-up and cosine decay over ``total_steps``, with the changes of earlier resumes.

    Args:
        lr: Peak rate.
        warmup: Linear warm-up steps (0: none).
        min_lr: Final rate.
        total_steps: Steps planned when the run started.
        changes: ``(from_step, total_steps)`` for each earlier resume that changed the total.
    """

    def __init__(
        self,
        lr: float,
        warmup: int,
        min_lr: float,
        total_steps: int,
        changes: Sequence[tuple[int, int]] = (),
    ) -> None:
        super().__init__()
        self.lr, self.warmup, self.min_lr = float(lr), int(warmup), float(min_lr)
        self.total_steps = int(total_steps)
        self.changes = [(int(s), int(t)) for s, t in changes]
        self._base = tasks.make_schedule(self.lr, self.total_steps, self.warmup, self.min_lr)

    @property
    def planned_total(self) -> int:
        """The last step of the current plan."""
        return self.changes[-1][1] if self.changes else self.total_steps

    def rate(self, step: int) -> float:
        fn: Callable[[int], float] = self._base.rate
        for start, total in self.changes:
            if step < start:
                break
            fn = self._continued(fn, start, total)
        return fn(step)

    def _continued(
        self, before: Callable[[int], float], start: int, total: int
    ) -> Callable[[int], float]:
        """The curve from ``start`` on, when a resume there plans ``total`` steps."""
        if start < self.warmup:  # the same ramp, then the decay over the new total
            return tasks.make_schedule(self.lr, total, self.warmup, self.min_lr).rate
        decay = CosineAnnealing(before(start), self.min_lr, max(total - start, 1))
        return lambda step: decay.rate(step - start)

    def plan(self) -> dict[str, Any]:
        """What ``config.json`` keeps (under ``"lr_schedule"``) to rebuild this schedule."""
        return {
            "lr": self.lr,
            "warmup": self.warmup,
            "min_lr": self.min_lr,
            "total_steps": self.total_steps,
            "changes": [list(c) for c in self.changes],
        }

    @classmethod
    def from_plan(cls, plan: dict[str, Any]) -> RunSchedule:
        """Rebuild the schedule ``plan()`` described."""
        return cls(
            float(plan["lr"]),
            int(plan["warmup"]),
            float(plan["min_lr"]),
            int(plan["total_steps"]),
            [(int(s), int(t)) for s, t in plan.get("changes", [])],
        )

    def continue_at(self, step: int, total: int) -> bool:
        """Plan ``total`` steps from ``step`` on (a resume there); the rate at ``step`` is
        unchanged. A change at or after ``step`` (from a resume of a later record) is replaced.

        Returns:
            Whether the plan changed.
        """
        if total == self.planned_total or total <= step:  # no change, or no step left to plan
            return False
        self.changes = [c for c in self.changes if c[0] < step]
        if total != self.planned_total:
            self.changes.append((int(step), int(total)))
        return True


class ContinueSchedule(Callback):
    """At the start of ``fit`` (after a resume restored the record), plan ``total`` steps for
    ``schedule`` from the restored step on, and hand the new plan to ``saved`` when it changed.
    """

    def __init__(
        self, schedule: RunSchedule, total: int, saved: Callable[[dict[str, Any]], None]
    ) -> None:
        self.schedule = schedule
        self.total = int(total)
        self.saved = saved

    def on_fit_start(self, learner: Any) -> None:
        if self.schedule.continue_at(learner.steps, self.total):
            self.saved(self.schedule.plan())
