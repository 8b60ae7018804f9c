"""load_training checks everything before it changes anything, and changes nothing on failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember as em
from ember.optim import Adam, GradientsParams, lr
from ember.record import RecordError, load_training, save_training
from ember.record.io import atomic_write, decode, encode, read_bytes
from tests.unit.record.small_net import Net


def _train(model: Net, optim: Adam, sched: lr.LrScheduler, seed: int, steps: int = 2) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = em.Tensor.from_data(rng.normal(size=(5, 3)).astype(np.float32))
        grads = GradientsParams.from_grads(model(x).sum().backward(), model)
        optim.step(next(sched), model, grads)


def _record(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A training record of a model trained 2 steps, and the snapshot of what it saved."""
    em.seed(0)
    model, optim, sched = Net(), Adam(), lr.Exponential(1e-2, 0.9)
    _train(model, optim, sched, seed=0)
    path = tmp_path / "good.safetensors"
    save_training(path, model, optim, sched, step=2)
    return path, _snapshot(model, optim, sched)


Edit = Callable[[dict[str, np.ndarray], dict[str, str]], None]


def _rewrite(src: Path, dst: Path, edit: Edit) -> Path:
    """``src`` with ``edit`` applied to its tensors and metadata, checksummed afresh (so only the
    validation of the content can reject it)."""
    arrays, meta = decode("test", src, read_bytes("test", src))
    edit(arrays, meta)
    atomic_write(dst, encode(arrays, meta))
    return dst


def _set(key: str, value: np.ndarray) -> Edit:
    return lambda arrays, meta: arrays.__setitem__(key, value)


def _meta(key: str, value: str) -> Edit:
    return lambda arrays, meta: meta.__setitem__(key, value)


def _duplicate_ids(arrays: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    ids = json.loads(meta["param_ids"])
    ids["out.weight"] = ids["fc.weight"]
    meta["param_ids"] = json.dumps(ids)


W = (4, 3)  # fc.weight
CASES: dict[str, tuple[Edit, str]] = {
    "moment_broadcastable_shape": (
        _set("optim/fc.weight/exp_avg", np.zeros((1, 3), np.float32)),
        r"fc\.weight/exp_avg: expected float32 \(4, 3\).*got float32 \(1, 3\)",
    ),
    "moment_int32": (
        _set("optim/fc.weight/exp_avg_sq", np.zeros(W, np.int32)),
        r"fc\.weight/exp_avg_sq: expected float32 \(4, 3\).*got int32 \(4, 3\)",
    ),
    "moment_float64": (
        _set("optim/fc.bias/exp_avg", np.zeros(4, np.float64)),
        r"fc\.bias/exp_avg: expected float32",
    ),
    "negative_step_count": (_set("optim/fc.bias/step", np.array(-3, np.int64)), r"count >= 0"),
    "unknown_parameter": (_set("optim/fc.nothing/exp_avg", np.zeros(W, np.float32)), r"names no"),
    "duplicate_param_ids": (_duplicate_ids, r"give two parameters one id: fc\.weight and out"),
    "malformed_param_id": (_meta("param_ids", json.dumps({"fc.weight": "-1"})), "16 hex"),
    "scheduler_not_json": (_meta("scheduler", "{step: 3"), "not JSON"),
    "scheduler_missing_step": (_meta("scheduler", json.dumps({"steps": 3})), "'step' a count"),
    "scheduler_wrong_type": (_meta("scheduler", json.dumps([3])), "expected a JSON object"),
    "scheduler_string_step": (_meta("scheduler", json.dumps({"step": "3"})), "'step' a count"),
    "scheduler_negative_step": (_meta("scheduler", json.dumps({"step": -1})), "'step' a count"),
    "step_not_a_count": (_meta("step", "-7"), "step metadata is damaged"),
    "module_shape": (_set("model/out.bias", np.zeros(3, np.float32)), "shapes differ"),
}


def _snapshot(model: Net, optim: Adam, sched: lr.LrScheduler) -> dict[str, Any]:
    state: dict[str, Any] = {k: v.to_numpy().copy() for k, v in model.state_dict().items()}
    state["ids"] = [p.id for p in model.parameters()]
    for name, p in model.named_parameters():
        for key, v in (optim.state_of(p.id) or {}).items():
            state[f"optim/{name}/{key}"] = v.to_numpy().copy() if isinstance(v, em.Tensor) else v
    state["sched"] = sched.state()
    return state


def _assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_content_is_a_record_error_and_changes_nothing(tmp_path: Path, case: str) -> None:
    edit, message = CASES[case]
    bad = _rewrite(_record(tmp_path)[0], tmp_path / "bad.safetensors", edit)
    em.seed(1)  # another model, optimizer and scheduler, mid-run
    model, optim, sched = Net(), Adam(), lr.Exponential(1e-2, 0.9)
    _train(model, optim, sched, seed=1, steps=3)
    before = _snapshot(model, optim, sched)
    error = RecordError if case != "module_shape" else em.ShapeError
    with pytest.raises(error, match=message):
        load_training(bad, model, optim, sched)
    _assert_same(before, _snapshot(model, optim, sched))


class _FailsOnSecondLoad(lr.Exponential):
    """Accepts the state once (the trial on a copy), then fails (on the real scheduler, after
    the module and optimizer were loaded)."""

    loads = 0  # class-wide: a deep copy shares it

    def load_state(self, state: dict[str, Any]) -> None:
        type(self).loads += 1
        if type(self).loads > 1:
            raise OSError("simulated failure after the module was loaded")
        super().load_state(state)


def test_a_late_failure_puts_the_module_and_optimizer_back(tmp_path: Path) -> None:
    good, _ = _record(tmp_path)
    em.seed(1)
    model, optim = Net(), Adam()
    sched = _FailsOnSecondLoad(1e-2, 0.9)
    _train(model, optim, sched, seed=1, steps=3)
    before = _snapshot(model, optim, sched)
    with pytest.raises(OSError, match="simulated"):
        load_training(good, model, optim, sched)
    assert _FailsOnSecondLoad.loads == 2  # the failure came after the trial
    _assert_same(before, _snapshot(model, optim, sched))


def test_a_good_record_still_loads_everything(tmp_path: Path) -> None:
    good, saved = _record(tmp_path)
    em.seed(1)
    model, optim, sched = Net(), Adam(), lr.Exponential(1e-2, 0.9)
    assert load_training(good, model, optim, sched) == 2
    assert sched.step == 2
    _assert_same(saved, _snapshot(model, optim, sched))
