"""``ReduceOnPlateau`` (in ``em.optim.lr``): a rate that drops when a reported metric stalls."""

from __future__ import annotations

import math
from typing import Any

from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from .lr import LrScheduler


class ReduceOnPlateau(LrScheduler):
    """The rules of ``torch.optim.lr_scheduler.ReduceLROnPlateau``, as an iterator of floats.

    ``next()`` returns the current rate (it does not depend on how often it is called);
    ``report(metric)`` takes one value of the monitored metric, once per epoch, and returns the
    rate from then on. After more than ``patience`` reports without an improvement the rate
    becomes ``max(rate * factor, min_lr)`` (a change smaller than ``eps`` is skipped), then
    ``cooldown`` reports are ignored. An improvement beats the best value so far by
    ``threshold``: relatively (``best * (1 - threshold)`` in ``mode="min"``, ``best *
    (1 + threshold)`` in ``"max"``) or absolutely (``threshold_mode="abs"``).

    In a hand-written loop: ``lr = next(sched)`` for each step, ``sched.report(valid_loss)``
    after each epoch (PyTorch: ``scheduler.step(valid_loss)``). ``em.train.Learner`` reports
    the epoch's ``monitor`` metric itself (``"valid_loss"``, or ``"train_loss"`` when it has
    no validation data).

    Example:
        >>> sched = ReduceOnPlateau(1e-3, factor=0.5, patience=2)
        >>> learner = em.train.Learner(model, em.optim.Adam(), lr=sched, ...)
    """

    def __init__(
        self,
        initial: float,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float = 0.0,
        eps: float = 1e-8,
        *,
        monitor: str = "valid_loss",
    ) -> None:
        super().__init__(per_epoch=True)
        op = "ReduceOnPlateau"
        if mode not in ("min", "max"):
            raise ShapeError(f"{op}: expected mode 'min' or 'max', got {mode!r}.")
        if threshold_mode not in ("rel", "abs"):
            raise ShapeError(
                f"{op}: expected threshold_mode 'rel' or 'abs', got {threshold_mode!r}."
            )
        if not 0.0 <= factor < 1.0:
            raise ShapeError(f"{op}: expected 0 <= factor < 1, got {factor!r}.")
        for name, v in (("patience", patience), ("cooldown", cooldown)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ShapeError(f"{op}: expected {name} to be an int >= 0, got {v!r}.")
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor, self.threshold = float(factor), float(threshold)
        self.patience, self.cooldown = patience, cooldown
        self.min_lr, self.eps = float(min_lr), float(eps)
        self.monitor = str(monitor)
        self.lr = float(initial)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.reports = 0

    def rate(self, step: int) -> float:
        """The current rate, whatever ``step``: the rate moves on ``report``, not on steps."""
        return self.lr

    def _better(self, value: float) -> bool:
        best, th = self.best, self.threshold
        if self.mode == "min":
            return value < (best * (1.0 - th) if self.threshold_mode == "rel" else best - th)
        return value > (best * (1.0 + th) if self.threshold_mode == "rel" else best + th)

    def report(self, metric: float | Tensor) -> float:
        """Take one epoch's value of the monitored metric (a number or a 0-d tensor); returns
        the rate from now on. A NaN never improves (it counts as a bad epoch)."""
        if isinstance(metric, Tensor) and metric.ndim == 0:
            metric = float(metric.item())
        if isinstance(metric, bool) or not isinstance(metric, (int, float)):
            raise DTypeError(
                f"ReduceOnPlateau.report: expected a number (or a 0-d tensor), got "
                f"{type(metric).__name__}."
            )
        value = float(metric)
        self.reports += 1
        if self._better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            new = max(self.lr * self.factor, self.min_lr)
            if self.lr - new > self.eps:
                self.lr = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        return self.lr

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "lr": self.lr,
            "best": self.best,
            "num_bad_epochs": self.num_bad_epochs,
            "cooldown_counter": self.cooldown_counter,
            "reports": self.reports,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.lr = float(state["lr"])
        self.best = float(state["best"])
        self.num_bad_epochs = int(state["num_bad_epochs"])
        self.cooldown_counter = int(state["cooldown_counter"])
        self.reports = int(state["reports"])
