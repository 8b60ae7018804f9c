"""One rank of the N-process accumulation and failure tests (started by test_ddp_accumulation.py).

Usage: python accum_worker.py MODE OUT [FAIL_STEP]

- ``MODE=train``: ``STEPS`` optimizer steps (SGD with momentum, then Adam), each accumulating
  ``MICRO`` micro-batches; every micro-step but the last inside ``ddp.no_sync()``. Rank 0 writes
  the parameters and every rank's all-reduce count to ``OUT`` (.npz).
- ``MODE=learner``: ``em.train.Learner(devices=group, grad_accumulation=MICRO)`` for one epoch
  of ``STEPS * MICRO`` batches, each rank loading its part of every batch; rank 0 writes the
  parameters and the validation loss.
- ``MODE=raise``: rank 1 raises at step ``FAIL_STEP`` and exits; ``MODE=hang``: rank 1 raises,
  catches it and sleeps (alive, never answering). Rank 1 writes the time it failed to
  ``OUT.failed_at``; the other ranks must stop with ``DistributedError``, each writing the time
  and the error text to ``OUT.rank<r>.txt``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

import ember as em
from ember import nn
from ember.distributed import DistributedDataParallel, ProcessGroup
from ember.errors import DistributedError

STEPS = 5
MICRO = 2  # micro-batches per optimizer step
ROWS = 8  # rows of one micro-batch, split over the ranks (1, 2 and 4 divide it)
BUCKET_MB = 200 / 2**20  # ~200 bytes: several buckets for the small net


class Net(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8, device=device, dtype=em.float64)
        self.fc2 = nn.Linear(8, 3, device=device, dtype=em.float64)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(nn.functional.tanh(self.fc1(x)))


def micro_batch(step: int, k: int, device: em.Device) -> tuple[em.Tensor, em.Tensor]:
    rng = np.random.default_rng([500, step, k])
    x = em.Tensor.from_data(rng.normal(size=(ROWS, 4)), device=device)
    y = em.Tensor.from_data(rng.integers(0, 3, size=ROWS), device=device)
    return x, y


def optimizers() -> dict[str, object]:
    return {"sgd": em.optim.SGD(momentum=0.9), "adam": em.optim.Adam()}


def reference() -> dict[str, np.ndarray]:
    """One process on the full micro-batches, accumulated with ``GradientsAccumulator``."""
    dev = em.Device.torch("cpu")
    out: dict[str, np.ndarray] = {}
    for name, opt in optimizers().items():
        em.seed(0)
        model = Net(dev.autodiff())
        for step in range(STEPS):
            acc = em.optim.GradientsAccumulator()
            for k in range(MICRO):
                x, y = micro_batch(step, k, dev)
                loss = nn.functional.cross_entropy(model(x), y) * (1.0 / MICRO)
                acc.accumulate(model, em.optim.GradientsParams.from_grads(loss.backward(), model))
            model = opt.step(0.1, model, acc.grads())  # type: ignore[attr-defined]
        for k_, v in model.state_dict().items():
            out[f"{name}.{k_}"] = v.to_numpy()
    return out


def train(group: ProcessGroup, out: str) -> None:
    dev = group.device()
    ddp = DistributedDataParallel(group, bucket_mb=BUCKET_MB)
    result: dict[str, np.ndarray] = {}
    part = ROWS // group.world_size
    for name, opt in optimizers().items():
        em.seed(0 if group.rank == 0 else 7)  # other ranks start elsewhere; broadcast fixes it
        model = group.broadcast_module(Net(dev.autodiff()))
        for step in range(STEPS):
            acc = em.optim.GradientsAccumulator()
            for k in range(MICRO):
                x, y = micro_batch(step, k, dev)
                x, y = x.narrow(0, group.rank * part, part), y.narrow(0, group.rank * part, part)
                loss = nn.functional.cross_entropy(model(x), y) * (1.0 / MICRO)
                if k < MICRO - 1:
                    with ddp.no_sync():
                        grads = ddp.backward(loss, model)
                    assert len(grads) == 0 and ddp.holds_gradients
                else:
                    grads = ddp.backward(loss, model)
                    assert not ddp.holds_gradients
                acc.accumulate(model, grads)
            model = opt.step(0.1, model, acc.grads())  # type: ignore[attr-defined]
        for k_, v in model.state_dict().items():
            result[f"{name}.{k_}"] = v.to_numpy()
    counts = group.all_reduce([torch.tensor([float(ddp.reductions)])], average=False)[0]
    result["_reductions_sum"] = counts.numpy()
    result["_reductions"] = np.array([ddp.reductions])
    result["_buckets"] = np.array([len(ddp._plan)])
    if group.rank == 0:
        np.savez(out, **result)
    group.barrier()
    group.close()


def learner_data(part: int, parts: int) -> tuple[object, object]:
    """Loaders of rows ``part`` of ``parts`` of every training batch (ROWS rows), and of the
    validation rows (the same on every rank)."""
    from ember.data import ArrayDataset, DataLoader

    rng = np.random.default_rng(77)
    n = STEPS * MICRO * ROWS
    x, y = rng.normal(size=(n, 4)), rng.integers(0, 3, size=n)
    h = ROWS // parts
    rows = np.concatenate(
        [np.arange(k * ROWS + part * h, k * ROWS + (part + 1) * h) for k in range(n // ROWS)]
    )
    cpu = em.Device.torch("cpu")
    train = DataLoader(ArrayDataset(x[rows], y[rows]), batch_size=h, prefetch=0, device=cpu)
    valid = DataLoader(ArrayDataset(x[:16], y[:16]), batch_size=16, prefetch=0, device=cpu)
    return train, valid


def fit(devices: object, part: int, parts: int) -> tuple[dict[str, np.ndarray], float]:
    """Parameters and last validation loss of one Learner epoch (Adam, accumulation MICRO)."""
    em.seed(0)
    dev = em.Device.torch("cpu")
    train, valid = learner_data(part, parts)
    learner = em.train.Learner(
        Net(dev.autodiff()),
        em.optim.Adam(),
        lr=0.05,
        display="none",
        grad_accumulation=MICRO,
        devices=devices,  # type: ignore[arg-type]
    )
    history = learner.fit(train, valid, epochs=1)  # type: ignore[arg-type]
    params = {k: v.to_numpy() for k, v in learner.model.state_dict().items()}
    return params, float(history[-1]["valid_loss"])


def learner(group: ProcessGroup, out: str) -> None:
    params, valid_loss = fit(group, group.rank, group.world_size)
    if group.rank == 0:
        np.savez(out, valid_loss=np.array([valid_loss]), **params)
    group.barrier()
    group.close()


def fail(group: ProcessGroup, out: str, mode: str, fail_step: int) -> None:
    dev = group.device()
    ddp = DistributedDataParallel(group, bucket_mb=BUCKET_MB)
    em.seed(0)
    model = group.broadcast_module(Net(dev.autodiff()))
    part = ROWS // group.world_size
    try:
        for step in range(STEPS):
            if group.rank == 1 and step == fail_step:
                Path(f"{out}.failed_at").write_text(repr(time.time()))
                try:
                    raise RuntimeError(f"rank 1 fails on purpose at step {step}")
                except RuntimeError:
                    if mode == "hang":  # alive but never answering again
                        time.sleep(120)
                    raise
            x, y = micro_batch(step, 0, dev)
            x, y = x.narrow(0, group.rank * part, part), y.narrow(0, group.rank * part, part)
            grads = ddp.backward(nn.functional.cross_entropy(model(x), y), model)
            model = em.optim.SGD().step(0.1, model, grads)
    except DistributedError as e:
        Path(f"{out}.rank{group.rank}.txt").write_text(f"{time.time()!r}\n{type(e).__name__}: {e}")
        raise SystemExit(3) from None


def _all_started(out: str, timeout: float = 180.0) -> None:
    """A file rendezvous before joining the group: on a loaded machine one process can start
    seconds after the other, longer than the failure modes' short collective timeout."""
    import os

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    Path(f"{out}.started{rank}").write_text("")
    deadline = time.time() + timeout
    while not all(Path(f"{out}.started{r}").exists() for r in range(world)):
        if time.time() > deadline:
            raise SystemExit(f"rank {rank}: the other ranks did not start within {timeout} s")
        time.sleep(0.05)


def main(mode: str, out: str, fail_step: str = "2") -> None:
    timeout = 6.0 if mode in ("raise", "hang") else 60.0
    if mode in ("raise", "hang"):
        _all_started(out)
    group = ProcessGroup.from_env("gloo", timeout_s=timeout)
    if mode == "train":
        train(group, out)
    elif mode == "learner":
        learner(group, out)
    else:
        fail(group, out, mode, int(fail_step))


if __name__ == "__main__":
    main(*sys.argv[1:4])
