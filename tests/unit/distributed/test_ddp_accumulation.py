"""DDP with gradient accumulation (``no_sync``) and failing ranks, on Gloo processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.distributed import DistributedDataParallel, ProcessGroup

from . import accum_worker

WORKER = Path(accum_worker.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(
    world: int, *args: str, timeout: float, kill_after_rank0: bool = False
) -> tuple[list[int], str]:
    """Start ``world`` worker processes; their return codes and joined logs. With
    ``kill_after_rank0`` the other ranks are killed once rank 0 exited (a hung rank)."""
    port = str(_free_port())
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    base["PYTHONPATH"] = os.pathsep.join([str(WORKER.parent), base.get("PYTHONPATH", "")])
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            env=dict(base, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), MASTER_PORT=port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(world)
    ]
    logs = []
    try:
        for r, p in enumerate(procs):
            if kill_after_rank0 and r > 0:
                p.kill()
            logs.append(p.communicate(timeout=timeout)[0].decode())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs], "\n".join(logs)


@pytest.mark.parametrize("world", [2, 4])
def test_processes_with_accumulation_equal_one_process(tmp_path: Path, world: int) -> None:
    out = tmp_path / "params.npz"
    codes, logs = _launch(world, "train", str(out), timeout=240)
    assert codes == [0] * world, logs
    got = dict(np.load(out))
    want = accum_worker.reference()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)
    # one all-reduce per bucket per optimizer step, none for the no_sync micro-steps
    buckets = int(got["_buckets"][0])
    per_rank = 2 * accum_worker.STEPS * buckets  # two optimizers
    assert buckets >= 2 and int(got["_reductions"][0]) == per_rank
    assert float(got["_reductions_sum"][0]) == world * per_rank


def test_learner_on_a_process_group_equals_one_process(tmp_path: Path) -> None:
    """``Learner(devices=group)``: 2 ranks, each loading half of every batch, accumulating 2
    micro-batches per step, end where one process on the full batches ends."""
    out = tmp_path / "learner.npz"
    codes, logs = _launch(2, "learner", str(out), timeout=240)
    assert codes == [0, 0], logs
    got = dict(np.load(out))
    want, valid_loss = accum_worker.fit(None, 0, 1)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(got["valid_loss"][0], valid_loss, rtol=1e-10)


@pytest.mark.parametrize("mode", ["raise", "hang"])
def test_failing_rank_stops_the_others_in_bounded_time(tmp_path: Path, mode: str) -> None:
    """Rank 1 raises at step 2 and exits ("raise": Gloo sees the connection close) or stays
    alive without answering ("hang": the 6 s collective timeout fires); rank 0 must stop with
    ``DistributedError`` soon after, never hang. The latency is measured from the failure, so a
    slow start of the processes on a loaded machine does not count."""
    out = tmp_path / "fail"
    codes, logs = _launch(2, mode, str(out), "2", timeout=240, kill_after_rank0=mode == "hang")
    assert codes[0] == 3 and codes[1] != 0, logs  # rank 0 stopped with DistributedError
    failed_at = float(Path(f"{out}.failed_at").read_text())
    stopped_at, text = Path(f"{out}.rank0.txt").read_text().split("\n", 1)
    latency = float(stopped_at) - failed_at
    assert text.startswith("DistributedError: DistributedDataParallel.backward: the collective")
    assert "on rank 0 of 2" in text and "another rank died, raised or stopped answering" in text
    if mode == "hang":  # the survivor waited for the timeout (6 s), not for ever
        assert "timed out" in text and "(timeout 6s)" in text
        assert 5.0 < latency < 40.0
    else:
        assert "failed" in text and latency < 30.0
        assert "rank 1 fails on purpose at step 2" in logs


class _Counting(ProcessGroup):
    """One rank, no torch.distributed: counts the all-reduces started."""

    def __init__(self) -> None:
        super().__init__(0, 1, 0, "gloo")
        self.calls = 0

    def start_all_reduce(self, flat: torch.Tensor) -> Any:
        self.calls += 1
        return _Done()


class _Done:
    def wait(self) -> None:
        return None


def test_no_sync_holds_gradients_and_reduces_once() -> None:
    em.seed(5)
    dev = em.Device.torch("cpu")
    model = accum_worker.Net(dev.autodiff())
    group = _Counting()
    ddp = DistributedDataParallel(group, bucket_mb=accum_worker.BUCKET_MB)
    want = em.optim.GradientsAccumulator()
    got = em.optim.GradientsAccumulator()
    for k in range(3):
        x, y = accum_worker.micro_batch(0, k, dev)
        loss = nn.functional.cross_entropy(model(x), y) * (1.0 / 3)
        ref = nn.functional.cross_entropy(model(x), y) * (1.0 / 3)
        want.accumulate(model, em.optim.GradientsParams.from_grads(ref.backward(), model))
        if k < 2:
            with ddp.no_sync():
                grads = ddp.backward(loss, model)
            assert len(grads) == 0 and group.calls == 0 and ddp.holds_gradients
        else:
            grads = ddp.backward(loss, model)
        got.accumulate(model, grads)
    assert not ddp.holds_gradients and group.calls == ddp.reductions == len(ddp._plan) >= 2
    total, ref_total = got.grads(), want.grads()
    for p in model.parameters():
        g, w = total.get(p.id), ref_total.get(p.id)
        assert g is not None and w is not None
        np.testing.assert_allclose(g.to_numpy(), w.to_numpy(), rtol=1e-12, atol=1e-15)


def test_no_sync_sum_of_a_parameter_the_last_pass_does_not_reach() -> None:
    """A parameter reached only inside ``no_sync`` still reduces its held sum."""

    class TwoHeads(nn.Module):
        def __init__(self, device: em.Device) -> None:
            super().__init__()
            self.a = nn.Linear(4, 3, device=device, dtype=em.float64)
            self.b = nn.Linear(4, 3, device=device, dtype=em.float64)

        def forward(self, x: em.Tensor, head: str) -> em.Tensor:
            return self.a(x) if head == "a" else self.b(x)

    em.seed(6)
    dev = em.Device.torch("cpu")
    model = TwoHeads(dev.autodiff())
    ddp = DistributedDataParallel(_Counting())
    x, y = accum_worker.micro_batch(1, 0, dev)
    with ddp.no_sync():
        ddp.backward(nn.functional.cross_entropy(model(x, "b"), y), model)
    grads = ddp.backward(nn.functional.cross_entropy(model(x, "a"), y), model)
    ref_b = em.optim.GradientsParams.from_grads(
        nn.functional.cross_entropy(model(x, "b"), y).backward(), model
    )
    gb = grads.get(model.b.weight.id)
    wb = ref_b.get(model.b.weight.id)
    assert gb is not None and wb is not None
    np.testing.assert_allclose(gb.to_numpy(), wb.to_numpy(), rtol=1e-12)
    assert grads.get(model.a.weight.id) is not None


def test_timeout_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "x", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(em.EmberError, match="timeout_s > 0"):
        ProcessGroup.from_env("gloo", timeout_s=0)
