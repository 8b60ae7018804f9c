"""Learner: a non-finite loss or weight stops fit (NonFiniteError) and saves nothing diverged."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember as em
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.train import Learner, NonFiniteError, classification_step

STEPS_PER_EPOCH = 6  # 96 items in batches of 16

# diverging on purpose: NumPy warns about the overflowing matmuls
pytestmark = pytest.mark.filterwarnings("ignore:(overflow|invalid value) encountered")


def _data(n: int = 96) -> ArrayDataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    return ArrayDataset(x, y)


def _model(device: em.Device) -> nn.Module:
    d = device.autodiff()
    return nn.Sequential(nn.Linear(4, 16, device=d), nn.ReLU(), nn.Linear(16, 3, device=d))


def _learner(
    out: Path | None, lr: float | Iterator[float], device: em.Device | None = None, **kw: Any
) -> tuple[Learner, DataLoader, DataLoader]:
    em.seed(0)
    device = device or em.Device.cpu()
    train = DataLoader(_data(), batch_size=16, shuffle=True, seed=1, prefetch=0, device=device)
    valid = DataLoader(_data(32), batch_size=16, prefetch=0, device=device)
    learner = Learner(_model(device), em.optim.SGD(), lr=lr, output_dir=out, display="none", **kw)
    return learner, train, valid


def _finite(learner: Learner) -> bool:
    return all(np.isfinite(p.val().to_numpy()).all() for p in learner.model.parameters())


def test_a_nan_loss_stops_fit_naming_epoch_step_and_metric(
    tmp_path: Path, device: em.Device
) -> None:
    learner, train, valid = _learner(tmp_path, 1e30, device, best_metric="valid_accuracy")
    with pytest.raises(NonFiniteError) as info:
        learner.fit(train, valid, epochs=2)
    e = info.value
    assert isinstance(e, em.EmberError) and e.metric == "train_loss" and e.epoch == 1
    assert not math.isfinite(e.value)
    assert e.step == learner.steps + 1  # the batch's own update was not applied
    assert f"at epoch 1 step {e.step} (batch {e.step} of {STEPS_PER_EPOCH})" in str(e)
    assert "allow_nonfinite=True" in str(e)
    for name in ("model.safetensors", "best.safetensors", "records", "metrics.csv"):
        assert not (tmp_path / name).exists(), name


def test_divergence_in_a_later_epoch_keeps_the_last_good_record(tmp_path: Path) -> None:
    rates = iter([0.05] * STEPS_PER_EPOCH + [1e30] * 100)  # epoch 2 diverges
    learner, train, valid = _learner(tmp_path, rates, best_metric="valid_loss")
    with pytest.raises(NonFiniteError, match="at epoch 2 step") as info:
        learner.fit(train, valid, epochs=3)
    assert info.value.epoch == 2 and info.value.step > STEPS_PER_EPOCH
    assert [p.name for p in (tmp_path / "records").iterdir()] == ["epoch-0001"]
    assert not (tmp_path / "model.safetensors").exists()
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 1  # epoch 2: no row
    best = _model(em.Device.cpu())
    best.load(tmp_path / "best.safetensors")
    assert all(np.isfinite(p.val().to_numpy()).all() for p in best.parameters())

    again, train, valid = _learner(tmp_path, iter([0.05] * 100))  # the record resumes
    again.fit(train, valid, epochs=2, resume=True)
    assert again.epoch == 2 and _finite(again)


def test_weights_made_infinite_by_the_last_step_are_caught_before_the_record(
    tmp_path: Path,
) -> None:
    """The losses stay finite (the last update of the epoch breaks the weights), and there is no
    validation set: the parameter check stops fit before the record is written."""
    rates = iter([0.05] * (STEPS_PER_EPOCH - 1) + [math.inf])
    learner, train, _ = _learner(tmp_path, rates)
    with pytest.raises(NonFiniteError, match="parameter '") as info:
        learner.fit(train, None, epochs=1)
    assert info.value.metric.startswith("parameter ") and info.value.step == STEPS_PER_EPOCH
    assert not (tmp_path / "records").exists() and not (tmp_path / "model.safetensors").exists()


def test_a_nonfinite_validation_loss_stops_fit(tmp_path: Path) -> None:
    def step(model: Any, batch: Sequence[em.Tensor]) -> Any:
        loss, logits, y = classification_step(model, batch)
        return (loss if model.training else loss * math.inf), logits, y

    learner, train, valid = _learner(tmp_path, 0.05, loss_fn=step)
    with pytest.raises(NonFiniteError, match="validation loss 'valid_loss'") as info:
        learner.fit(train, valid, epochs=2)
    assert info.value.metric == "valid_loss" and info.value.step == STEPS_PER_EPOCH
    assert not (tmp_path / "records").exists()


def test_allow_nonfinite_trains_on_and_never_makes_a_diverged_epoch_best(
    tmp_path: Path,
) -> None:
    rates = iter([0.05] * STEPS_PER_EPOCH + [1e30] * 100)
    learner, train, valid = _learner(
        tmp_path, rates, allow_nonfinite=True, best_metric="valid_accuracy"
    )
    history = learner.fit(train, valid, epochs=3)
    assert len(history) == 3 and math.isnan(history[-1]["train_loss"])
    assert learner.best is not None and learner.best["epoch"] == 1.0
    assert sorted(p.name for p in (tmp_path / "records").iterdir())[-1] == "epoch-0003"
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=_no_constant)  # NaN is written as null


def _no_constant(name: str) -> None:
    raise AssertionError(f"non-standard JSON constant {name}")


def test_the_check_reads_the_loss_once_per_batch_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No extra host read per step: ``item()`` runs once per train and valid batch (the value
    the metrics need anyway) plus once per parameter per epoch."""
    learner, train, valid = _learner(None, 0.05)
    calls = 0
    original = em.Tensor.item

    def counting(self: em.Tensor) -> Any:
        nonlocal calls
        calls += 1
        return original(self)

    monkeypatch.setattr(em.Tensor, "item", counting)
    learner.fit(train, valid, epochs=2)
    params = len(list(learner.model.parameters()))
    assert calls == 2 * (STEPS_PER_EPOCH + len(valid) + params)
