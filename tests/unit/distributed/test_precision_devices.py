"""Mixed precision with several devices: replicas and DDP ranks run their forwards in bf16/fp16."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.distributed import DistributedDataParallel, ProcessGroup
from ember.distributed.steps import DistributedSteps
from ember.train import Learner, classification_step

TORCH_CPU = em.Device.torch("cpu")
LR = 0.5
ROWS, BATCH = 64, 16  # four optimizer steps of 16 rows


class Net(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc1 = nn.Linear(12, 32, device=device)
        self.fc2 = nn.Linear(32, 5, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(nn.functional.tanh(self.fc1(x)))


class Recorder:
    """A loss step that records, per call, its thread and the dtype of the logits."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, em.DType]] = []
        self._lock = threading.Lock()

    def __call__(self, model: Any, batch: Sequence[em.Tensor]) -> Any:
        loss, logits, targets = classification_step(model, batch)
        with self._lock:
            self.seen.append((threading.current_thread().name, logits.dtype))
        return loss, logits, targets


def _loader() -> DataLoader:
    rng = np.random.default_rng(21)
    x = rng.normal(size=(ROWS, 12)).astype(np.float32)
    y = rng.integers(0, 5, size=ROWS)
    return DataLoader(ArrayDataset(x, y), batch_size=BATCH, prefetch=0, device=TORCH_CPU)


def _fit(precision: str, devices: Any = None) -> tuple[dict[str, np.ndarray], Recorder, Learner]:
    em.seed(3)
    step = Recorder()
    learner = Learner(
        Net(TORCH_CPU.autodiff()),
        em.optim.SGD(),
        lr=LR,
        loss_fn=step,
        display="none",
        precision=precision,
        devices=devices,
    )
    learner.fit(_loader(), epochs=1)
    params = {k: v.to_numpy().astype(np.float64) for k, v in learner.model.state_dict().items()}
    return params, step, learner


def _initial() -> dict[str, np.ndarray]:
    em.seed(3)
    return {
        k: v.to_numpy().astype(np.float64)
        for k, v in Net(TORCH_CPU.autodiff()).state_dict().items()
    }


def _max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_replicas_run_their_forwards_in_low_precision(precision: str) -> None:
    low = em.bfloat16 if precision == "bf16" else em.float16
    one, _, _ = _fit(precision)
    two, step, learner = _fit(precision, [TORCH_CPU, TORCH_CPU])
    threads = {name for name, _ in step.seen}
    assert len(threads) == 2 and all(n.startswith("ember-replica") for n in threads)
    assert all(dtype == low for _, dtype in step.seen), step.seen
    assert all(v.dtype == em.float32 for v in learner.model.state_dict().values())
    # Each replica rounds its half-batch weight gradient to the low dtype, one device rounds the
    # full-batch one: the runs agree to a few roundings (eps) of the parameters' motion.
    eps = 2.0**-8 if precision == "bf16" else 2.0**-11
    motion = _max_diff(one, _initial())
    assert motion > 0.05
    assert _max_diff(one, two) < 4 * eps * motion
    if precision == "fp16":  # one scaler, at its initial scale after four clean steps
        assert learner._amp.scaler is not None
        assert learner._amp.scaler.scale_value == 2.0**16


class _OneRank(ProcessGroup):
    """One rank, no torch.distributed: records the dtype of every all-reduced tensor."""

    def __init__(self) -> None:
        super().__init__(0, 1, 0, "gloo")
        self.dtypes: list[torch.dtype] = []

    def start_all_reduce(self, flat: torch.Tensor) -> Any:
        self.dtypes.append(flat.dtype)
        return _Done()

    def broadcast_module(self, module: Any, src: int = 0) -> Any:
        return module  # the only rank: its values are rank 0's


class _Done:
    def wait(self) -> None:
        return None


def test_ddp_rank_runs_bf16_forwards_and_reduces_float32_gradients() -> None:
    group = _OneRank()
    steps = DistributedSteps(DistributedDataParallel(group), shard=True)
    one, _, _ = _fit("bf16")
    got, step, _ = _fit("bf16", steps)
    assert step.seen and all(dtype == em.bfloat16 for _, dtype in step.seen)
    # gradient buckets and the scalar loss, all float32 (the loss in float64)
    assert group.dtypes and set(group.dtypes) <= {torch.float32, torch.float64}
    assert torch.float32 in group.dtypes
    assert _max_diff(one, got) < 1e-6  # one rank keeps every row: the one-device bf16 run


class _Rank(ProcessGroup):
    def __init__(self, rank: int, world: int) -> None:
        super().__init__(rank, world, rank, "gloo")


@pytest.mark.parametrize(("rank", "start", "size"), [(0, 0, 3), (1, 3, 3), (2, 6, 2)])
def test_shard_keeps_a_disjoint_slice_weighted_by_its_rows(
    rank: int, start: int, size: int
) -> None:
    steps = DistributedSteps(DistributedDataParallel(_Rank(rank, 3)), shard=True)
    x = em.Tensor.from_data(np.arange(8.0).reshape(8, 1), device=TORCH_CPU)
    rows, weight = steps._rows([x, x])
    assert rows[0].to_numpy().ravel().tolist() == list(range(start, start + size))
    assert weight == pytest.approx(size * 3 / 8)  # the mean over ranks is the batch mean


def test_shard_refuses_a_batch_smaller_than_the_world() -> None:
    steps = DistributedSteps(DistributedDataParallel(_Rank(0, 4)), shard=True)
    x = em.Tensor.from_data(np.zeros((3, 1)), device=TORCH_CPU)
    with pytest.raises(em.EmberError, match="at least 4 rows to split over 4 ranks, got 3"):
        steps._rows([x])
