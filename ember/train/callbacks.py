"""Callbacks the ``Learner`` calls at the end of each epoch (early stopping and friends)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .learner import Learner


class Callback:
    """Base class: override the hooks you need; each receives the learner."""

    def on_fit_start(self, learner: Learner) -> None:
        return None

    def on_epoch_end(self, learner: Learner, row: dict[str, float]) -> None:
        return None

    def on_fit_end(self, learner: Learner) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        """State saved in each record, so a resumed run continues identically."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class EarlyStopping(Callback):
    """Stop training when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs.

    Args:
        monitor: A column of the epoch row, e.g. "valid_loss" or "valid_accuracy".
        patience: Epochs in a row without improvement after which training stops.
        min_delta: Smallest change that counts as an improvement.
        mode: "min" (lower is better) or "max"; "auto" picks "max" for accuracies.

    Example:
        >>> stop = EarlyStopping("valid_loss", patience=2)
    """

    def __init__(
        self,
        monitor: str = "valid_loss",
        *,
        patience: int = 3,
        min_delta: float = 0.0,
        mode: str = "auto",
    ) -> None:
        if patience < 0:
            raise ValueError(f"EarlyStopping: expected patience >= 0, got {patience}.")
        if mode == "auto":
            mode = "max" if "accuracy" in monitor else "min"
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping: expected mode 'min', 'max' or 'auto', got {mode!r}.")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = abs(min_delta)
        self.mode = mode
        self.best = math.inf if mode == "min" else -math.inf
        self.best_epoch = 0
        self.wait = 0
        self.stopped_epoch: int | None = None

    def on_epoch_end(self, learner: Learner, row: dict[str, float]) -> None:
        if self.monitor not in row:
            raise KeyError(
                f"EarlyStopping: the epoch row has no column {self.monitor!r}; available: "
                f"{sorted(row)}. Pass a validation set or monitor a train_* column."
            )
        value = row[self.monitor]
        better = (
            value < self.best - self.min_delta
            if self.mode == "min"
            else value > self.best + self.min_delta
        )
        if better:
            self.best, self.best_epoch, self.wait = value, int(row["epoch"]), 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = int(row["epoch"])
            learner.stop_training = True
            learner.display.message(
                f"early stopping: {self.monitor} did not improve for {self.wait} epochs "
                f"(best {self.best:.4f} at epoch {self.best_epoch})"
            )

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "wait": self.wait}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = float(state["best"])
        self.best_epoch = int(state["best_epoch"])
        self.wait = int(state["wait"])
