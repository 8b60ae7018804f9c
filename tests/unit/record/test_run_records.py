"""A run's records survive crashes inside ``save_record``: resume skips partial and damaged
records and continues from the newest one that loads."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember as em
import ember.record.io as record_io
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.record import RecordError
from ember.train import Learner
from ember.train.display import PlainDisplay


class Net(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8, device=device)
        self.fc2 = nn.Linear(8, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(nn.functional.relu(self.fc1(x)))


def _setup(out: Path) -> tuple[Learner, DataLoader, io.StringIO]:
    em.seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    train = DataLoader(ArrayDataset(x, y), batch_size=16, shuffle=True, seed=1, prefetch=0)
    log = io.StringIO()
    sched = em.optim.lr.CosineAnnealing(0.05, 0.0, 30)
    learner = Learner(
        Net(em.Device.cpu().autodiff()),
        em.optim.Adam(),
        lr=sched,
        output_dir=out,
        display=PlainDisplay(log),
    )
    return learner, train, log


def _weights(learner: Learner) -> dict[str, np.ndarray]:
    return {k: v.to_numpy() for k, v in learner.model.state_dict().items()}


class _DiskFull(io.RawIOBase):
    """A file that takes half of what is written, then fails as a full disk would."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.real.write(bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        self.real.close()
        super().close()


def test_crash_inside_save_record_leaves_a_resumable_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref, train, _ = _setup(tmp_path / "ref")
    ref.fit(train, None, epochs=3)

    learner, train, _ = _setup(tmp_path / "run")
    learner.fit(train, None, epochs=1)
    real = os.fdopen
    monkeypatch.setattr(record_io.os, "fdopen", lambda fd, *a, **k: _DiskFull(real(fd, *a, **k)))
    with pytest.raises(OSError, match="No space left"):
        learner.fit(train, None, epochs=2)  # dies while writing epoch-0002
    monkeypatch.undo()
    records = tmp_path / "run" / "records"
    assert sorted(p.name for p in records.iterdir()) == ["epoch-0001", "epoch-0002.tmp"]
    # also a partial record with a half-written state.json, as a kill -9 would leave
    partial = records / "epoch-0003.tmp"
    shutil.copytree(records / "epoch-0001", partial)
    text = (partial / "state.json").read_text()
    (partial / "state.json").write_text(text[: len(text) // 2])

    resumed, train, _ = _setup(tmp_path / "run")
    resumed.fit(train, None, epochs=3, resume=True)
    assert sorted(p.name for p in records.iterdir()) == ["epoch-0001", "epoch-0002", "epoch-0003"]
    got, want = _weights(resumed), _weights(ref)
    assert all(np.array_equal(got[k], want[k]) for k in want)  # as if never interrupted
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in ref.history]


def test_resume_falls_back_to_the_newest_record_that_loads(tmp_path: Path) -> None:
    first, train, _ = _setup(tmp_path)
    first.fit(train, None, epochs=3)
    records = tmp_path / "records"
    newest = records / "epoch-0003" / "training.safetensors"
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0x04  # one flipped bit in the last tensor
    newest.write_bytes(bytes(data))
    (records / "epoch-0002" / "state.json").write_text('{"epoch": 2, "steps": ')

    resumed, train, log = _setup(tmp_path)
    assert resumed.latest_record() == records / "epoch-0003"
    resumed.fit(train, None, epochs=1, resume=True)  # nothing left to train: just the load
    assert resumed.epoch == 1
    lines = log.getvalue()
    assert "skipping damaged record epoch-0003" in lines and "checksum" in lines
    assert "skipping damaged record epoch-0002" in lines and "not valid JSON" in lines
    assert "continuing from epoch-0001, the newest record that loads" in lines


def test_resume_with_every_record_damaged_names_each(tmp_path: Path) -> None:
    first, train, _ = _setup(tmp_path)
    first.fit(train, None, epochs=2)
    for name in ("epoch-0001", "epoch-0002"):
        (tmp_path / "records" / name / "state.json").write_text("[]")
    resumed, train, _ = _setup(tmp_path)
    with pytest.raises(RecordError, match=r"no record .* loads: epoch-0002: .*; epoch-0001: "):
        resumed.fit(train, None, epochs=2, resume=True)


def test_state_json_of_the_wrong_shape_is_a_record_error(tmp_path: Path) -> None:
    first, train, _ = _setup(tmp_path)
    first.fit(train, None, epochs=1)
    state = tmp_path / "records" / "epoch-0001" / "state.json"
    state.write_text(state.read_text().replace('"steps": 3', '"steps": "3"'))
    before = _weights(first)
    with pytest.raises(RecordError, match=r"steps \(expected int, got str\)"):
        first.load_record(tmp_path / "records" / "epoch-0001", train)
    after = _weights(first)
    assert all(np.array_equal(before[k], after[k]) for k in before)
