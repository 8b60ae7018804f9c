"""em.train.Learner drives per-epoch schedulers once per epoch and reports to ReduceOnPlateau."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import ember as em
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.optim import SGD, lr
from ember.train import Learner


class RecordingSGD(SGD):
    """SGD that remembers the rate of every step."""

    def __init__(self) -> None:
        super().__init__(momentum=0.9)
        self.rates: list[float] = []

    def step(self, lr: float | None, module: Any, grads: Any) -> Any:
        assert lr is not None
        self.rates.append(lr)
        return super().step(lr, module, grads)


def _fit(
    sched: Any, epochs: int, out: Path | None = None, valid: bool = True, resume: bool = False
) -> tuple[Learner, RecordingSGD]:
    em.seed(0)
    dev = em.Device.cpu()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = nn.Linear(4, 2, device=dev.autodiff())
    train = DataLoader(ArrayDataset(x, y), batch_size=8, prefetch=0, device=dev)  # 6 steps
    val = DataLoader(ArrayDataset(x[:16], y[:16]), batch_size=8, prefetch=0, device=dev)
    optim = RecordingSGD()
    learner = Learner(model, optim, lr=sched, output_dir=out, display="none")
    learner.fit(train, val if valid else None, epochs=epochs, resume=resume)
    return learner, optim


def test_per_epoch_step_schedule_moves_once_per_epoch() -> None:
    sched = lr.Step(0.1, 1, 0.5, per_epoch=True)
    learner, optim = _fit(sched, 3)
    assert optim.rates == [0.1] * 6 + [0.05] * 6 + [0.025] * 6
    assert sched.step == 3 and [r["lr"] for r in learner.history] == [0.1, 0.05, 0.025]


def test_per_step_schedule_still_moves_every_step() -> None:
    sched = lr.Exponential(0.1, 0.5)
    _, optim = _fit(sched, 2)
    assert optim.rates == [0.1 * 0.5**i for i in range(12)]


def test_reduce_on_plateau_hears_the_valid_loss_once_per_epoch() -> None:
    # threshold 10 (relative): no epoch is ever an improvement, so patience 0 halves each time
    sched = lr.ReduceOnPlateau(0.1, factor=0.5, patience=0, threshold=10.0)
    _, optim = _fit(sched, 3)
    assert optim.rates == [0.1] * 6 + [0.05] * 6 + [0.025] * 6
    assert sched.reports == 3 and sched.lr == 0.0125


def test_reduce_on_plateau_without_validation_hears_the_train_loss() -> None:
    sched = lr.ReduceOnPlateau(0.1, patience=1)
    learner, _ = _fit(sched, 2, valid=False)
    assert sched.reports == 2 and sched.best == learner.history[-1]["train_loss"]


def test_reduce_on_plateau_resumes_from_a_record(tmp_path: Path) -> None:
    def make() -> lr.ReduceOnPlateau:
        return lr.ReduceOnPlateau(0.1, factor=0.5, patience=0, threshold=10.0)

    _, full = _fit(make(), 4, tmp_path / "full")
    _fit(make(), 2, tmp_path / "split")
    sched = make()
    _, resumed = _fit(sched, 4, tmp_path / "split", resume=True)
    assert resumed.rates == full.rates[12:] and sched.reports == 4
