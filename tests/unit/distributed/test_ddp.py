"""Distributed data parallel: 2 Gloo processes on loopback equal one process on the full batch."""

from __future__ import annotations

import inspect
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
from ember.errors import DeviceError, EmberError

from . import ddp_worker

WORKER = Path(ddp_worker.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(WORKER.parent), env.get("PYTHONPATH", "")])
    return env


def _reference() -> dict[str, np.ndarray]:
    """The same training in one process on the full batch."""
    dev = em.Device.torch("cpu")
    out: dict[str, np.ndarray] = {}
    for name, opt in ddp_worker.optimizers().items():
        em.seed(0)
        model = ddp_worker.Net(dev.autodiff())
        for step in range(ddp_worker.STEPS):
            x, y = ddp_worker.batch(step, dev)
            loss = nn.functional.cross_entropy(model(x), y)
            grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
            model = opt.step(0.1, model, grads)  # type: ignore[attr-defined]
        for k, v in model.state_dict().items():
            out[f"{name}.{k}"] = v.to_numpy()
    return out


def _check(path: Path) -> None:
    got = dict(np.load(path))
    want = _reference()
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_two_gloo_processes_equal_one_process(tmp_path: Path) -> None:
    _two_processes(tmp_path, "gloo")


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"
)
def test_two_nccl_processes_on_two_gpus_equal_one_process(tmp_path: Path) -> None:
    _two_processes(tmp_path, "nccl")


def _two_processes(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "params.npz"
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out), backend],
            env=_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_PORT=port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(2)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=120)[0].decode())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(logs)
    _check(out)


@pytest.mark.slow
def test_torchrun_launch(tmp_path: Path) -> None:
    out = tmp_path / "params.npz"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        str(WORKER),
        str(out),
    ]
    run = subprocess.run(cmd, env=_env(), capture_output=True, timeout=180)
    assert run.returncode == 0, run.stdout.decode() + run.stderr.decode()
    _check(out)


class _Done:
    def wait(self) -> None:
        return None


class _LocalGroup(ProcessGroup):
    """One rank, no torch.distributed: records when each bucket's reduction starts."""

    def __init__(self) -> None:
        super().__init__(0, 1, 0, "gloo")
        self.starts: list[tuple[int, bool]] = []

    def start_all_reduce(self, flat: torch.Tensor) -> Any:
        in_backward = any(f.function == "run_backward" for f in inspect.stack(context=0))
        self.starts.append((flat.numel(), in_backward))
        return _Done()


def test_reductions_start_during_backward() -> None:
    em.seed(3)
    dev = em.Device.torch("cpu")
    model = ddp_worker.Net(dev.autodiff())
    group = _LocalGroup()
    ddp = DistributedDataParallel(group, bucket_mb=200 / 2**20)
    x, y = ddp_worker.batch(0, dev)
    loss = nn.functional.cross_entropy(model(x), y)
    got = ddp.backward(loss, model)
    x, y = ddp_worker.batch(0, dev)
    want = em.optim.GradientsParams.from_grads(
        nn.functional.cross_entropy(model(x), y).backward(), model
    )
    assert sum(n for n, _ in group.starts) == model.num_params() and len(group.starts) >= 3
    assert group.starts[0][1], "the first bucket must start before backward finished"
    for p in model.parameters():
        np.testing.assert_array_equal(got.get(p.id).to_numpy(), want.get(p.id).to_numpy())  # type: ignore[union-attr]


def test_ddp_reduces_through_the_backward_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """DDP runs ``em.autodiff.backward`` with an ``on_leaf`` hook (never the engine directly), and
    the hook hands every trainable parameter's gradient to a bucket while the pass runs."""
    from ember._core.internal import leaf_id
    from ember.distributed import ddp as ddp_module

    assert ddp_module.backward is em.autodiff.backward
    assert not hasattr(ddp_module, "run_backward")
    calls: list[tuple[em.Tensor, list[int]]] = []

    def spy(loss: em.Tensor, *, on_leaf: Any = None) -> em.Gradients:
        assert callable(on_leaf)
        ids: list[int] = []

        def hook(i: int, g: Any) -> None:
            ids.append(i)
            on_leaf(i, g)

        calls.append((loss, ids))
        return em.autodiff.backward(loss, on_leaf=hook)

    monkeypatch.setattr(ddp_module, "backward", spy)
    em.seed(4)
    dev = em.Device.torch("cpu")
    model = ddp_worker.Net(dev.autodiff())
    group = _LocalGroup()
    x, y = ddp_worker.batch(0, dev)
    loss = nn.functional.cross_entropy(model(x), y)
    got = DistributedDataParallel(group, bucket_mb=200 / 2**20).backward(loss, model)
    assert len(calls) == 1 and calls[0][0] is loss
    want = {leaf_id(p.val()) for p in model.parameters()}
    assert sorted(calls[0][1]) == sorted(want) and None not in want
    assert all(in_backward for _, in_backward in group.starts[:-1])
    for p in model.parameters():
        g = got.get(p.id)
        assert g is not None and g.shape == p.shape and not g.is_autodiff()


class _Refusing(ProcessGroup):
    def __init__(self) -> None:
        super().__init__(0, 2, 0, "gloo")

    def start_all_reduce(self, flat: torch.Tensor) -> Any:
        raise AssertionError("communication started")


class _Split(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(2, 2, device=em.Device.torch("cpu").autodiff())
        self.b = nn.Linear(2, 2, device=em.Device.cpu().autodiff())

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.a(x)


def test_backend_mismatch_rejected_before_communication() -> None:
    ddp = DistributedDataParallel(_Refusing())
    numpy_model = nn.Linear(2, 1, device=em.Device.cpu().autodiff())
    loss = numpy_model(em.Tensor.from_data(np.ones((3, 2), np.float32))).mean()
    with pytest.raises(DeviceError, match="torch backend"):
        ddp.backward(loss, numpy_model)
    split = _Split()
    loss = split(em.Tensor.from_data(np.ones((3, 2), np.float32), device=em.Device.torch())).sum()
    with pytest.raises(DeviceError, match=r"'b\.weight'"):
        ddp.backward(loss, split)


def test_from_env_needs_torchrun_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(EmberError, match="torchrun"):
        ProcessGroup.from_env()
    with pytest.raises(ValueError, match="bucket_mb"):
        DistributedDataParallel(_Refusing(), bucket_mb=0)
