"""Learner: learning, exact resume, early stopping, accumulation, records and checkpointing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ember as em
import ember.optim
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.train import EarlyStopping, Learner


class Net(nn.Module):
    """A small classifier with dropout, so resuming must restore the random generator too."""

    def __init__(self, device: em.Device, p: float = 0.2) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16, device=device)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(16, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(self.drop(nn.functional.relu(self.fc1(x))))


def _data(n: int = 96) -> ArrayDataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    return ArrayDataset(x, y)


def _setup(
    out: Path | None,
    *,
    lr: float = 0.05,
    p: float = 0.2,
    device: em.Device | None = None,
    **kw: object,
) -> tuple[Learner, DataLoader, DataLoader]:
    em.seed(0)
    device = device or em.Device.cpu()
    model = Net(device.autodiff(), p)
    train = DataLoader(_data(), batch_size=16, shuffle=True, seed=1, prefetch=0, device=device)
    valid = DataLoader(_data(32), batch_size=16, prefetch=0, device=device)
    sched = em.optim.lr.CosineAnnealing(lr, 0.0, 50)
    learner = Learner(model, em.optim.Adam(), lr=sched, output_dir=out, display="none", **kw)
    return learner, train, valid


def test_learns_and_writes_logs(tmp_path: Path) -> None:
    learner, train, valid = _setup(tmp_path, keep_records=2)
    history = learner.fit(train, valid, epochs=4)
    assert len(history) == 4 and history[-1]["train_loss"] < history[0]["train_loss"]
    assert history[-1]["valid_accuracy"] > 0.7
    row = history[-1]
    for key in ("lr", "examples_per_s", "train_top5_accuracy", "valid_loss", "time_s"):
        assert key in row
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == ["epoch-0003", "epoch-0004"]
    assert (tmp_path / "model.safetensors").exists()
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 4
    assert (tmp_path / "metrics.csv").read_text().startswith("epoch,train_loss")


def test_resume_reproduces_uninterrupted_run(tmp_path: Path, device: em.Device) -> None:
    full, train, valid = _setup(tmp_path / "full", device=device)
    expected = full.fit(train, valid, epochs=4)

    first, train, valid = _setup(tmp_path / "split", device=device)
    first.fit(train, valid, epochs=2)
    em.seed(123)  # the resumed process starts from other random state
    resumed, train, valid = _setup(tmp_path / "split", device=device)
    em.seed(456)
    history = resumed.fit(train, valid, epochs=4, resume=True)
    keys = ("train_loss", "train_accuracy", "valid_loss", "lr")
    assert [[r[k] for k in keys] for r in history] == [[r[k] for k in keys] for r in expected]
    a = full.model.state_dict()
    b = resumed.model.state_dict()
    assert all(np.array_equal(a[k].to_numpy(), b[k].to_numpy()) for k in a)


def test_resume_without_records_is_an_error(tmp_path: Path) -> None:
    learner, train, valid = _setup(tmp_path)
    with pytest.raises(em.EmberError, match="no records"):
        learner.fit(train, valid, epochs=1, resume=True)


def test_early_stopping(tmp_path: Path) -> None:
    stop = EarlyStopping("valid_loss", patience=1)
    learner, train, valid = _setup(tmp_path, lr=1e-9, callbacks=[stop])
    history = learner.fit(train, valid, epochs=10)
    assert len(history) < 10 and stop.stopped_epoch == len(history)
    state = json.loads((learner.latest_record() / "state.json").read_text())  # type: ignore[operator]
    assert state["callbacks"][0]["wait"] == 1
    with pytest.raises(KeyError, match="no column"):
        EarlyStopping("valid_nothing").on_epoch_end(learner, {"epoch": 1.0})


def test_gradient_accumulation_matches_large_batch() -> None:
    def run(batch: int, acc: int) -> list[float]:
        em.seed(0)
        model = Net(em.Device.cpu().autodiff(), p=0.0)
        loader = DataLoader(_data(), batch_size=batch, prefetch=0)
        learner = Learner(model, em.optim.SGD(), lr=0.1, grad_accumulation=acc, display="none")
        learner.fit(loader, None, epochs=2)
        return [float(v) for v in learner.model.fc1.weight.val().to_numpy().ravel()]

    assert run(32, 1) == pytest.approx(run(16, 2), rel=1e-5, abs=1e-6)


def test_checkpointing_switch_gives_same_losses() -> None:
    def run(checkpointing: bool) -> tuple[list[float], object]:
        learner, train, valid = _setup(None, checkpointing=checkpointing)
        hist = learner.fit(train, valid, epochs=2)
        strategy = next(learner.model.parameters()).val().gradient_checkpointing_strategy()
        return [r["train_loss"] for r in hist], strategy

    plain, s_plain = run(False)
    balanced, s_bal = run(True)
    assert s_plain is em.GradientCheckpointingStrategy.Disabled
    assert s_bal is em.GradientCheckpointingStrategy.Balanced
    assert plain == balanced


def test_bad_configuration() -> None:
    model = Net(em.Device.cpu().autodiff())
    with pytest.raises(ValueError, match="grad_accumulation"):
        Learner(model, em.optim.SGD(), grad_accumulation=0)
    learner = Learner(model, em.optim.SGD(), lr=iter([0.1]), display="none")
    loader = DataLoader(_data(), batch_size=16, prefetch=0)
    with pytest.raises(em.EmberError, match="schedule ended"):
        learner.fit(loader, None, epochs=1)


def test_best_model_is_tracked_and_saved(tmp_path: Path) -> None:
    learner, train, valid = _setup(tmp_path, best_metric="valid_loss")
    history = learner.fit(train, valid, epochs=3)
    assert learner.best is not None
    assert learner.best["value"] == min(r["valid_loss"] for r in history)
    assert (tmp_path / "best.safetensors").exists()
    with pytest.raises(KeyError, match="best_metric"):
        Learner(learner.model, em.optim.SGD(), display="none", best_metric="nope")._track_best(
            {"epoch": 1.0}
        )


def test_rng_states_are_keyed_by_backend_placement() -> None:
    from ember.backend.registry import loaded_backends

    em.Tensor.zeros((1,), device=em.Device.cpu())  # the NumPy backend is loaded
    states = em.get_rng_state()  # what Learner records store
    assert "numpy:cpu" in states
    assert len(states) == len(loaded_backends())
    first = em.Tensor.random((4,), em.Distribution.uniform(0.0, 1.0)).to_numpy()
    em.set_rng_state(states)
    again = em.Tensor.random((4,), em.Distribution.uniform(0.0, 1.0)).to_numpy()
    np.testing.assert_array_equal(first, again)
