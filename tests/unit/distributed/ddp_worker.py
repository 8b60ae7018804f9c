"""One rank of the 2-process DDP test (started by test_ddp.py, directly or through torchrun).

Usage: python ddp_worker.py OUT.npz [gloo|nccl]. Trains ``Net`` for a few steps on this rank's
half of each batch with ``DistributedDataParallel`` (small buckets), and rank 0 writes the
parameters. Gloo runs on torch CPU; NCCL on this rank's GPU (``cuda:LOCAL_RANK``).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import ember as em
from ember import nn
from ember.distributed import DistributedDataParallel, ProcessGroup

STEPS = 3
ROWS = 12  # per step, split over the ranks


class Net(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8, device=device, dtype=em.float64)
        self.fc2 = nn.Linear(8, 8, device=device, dtype=em.float64)
        self.fc3 = nn.Linear(8, 3, device=device, dtype=em.float64)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc3(nn.functional.tanh(self.fc2(nn.functional.tanh(self.fc1(x)))))


def batch(step: int, device: em.Device) -> tuple[em.Tensor, em.Tensor]:
    rng = np.random.default_rng(100 + step)
    x = em.Tensor.from_data(rng.normal(size=(ROWS, 4)), device=device)
    y = em.Tensor.from_data(rng.integers(0, 3, size=ROWS), device=device)
    return x, y


def optimizers() -> dict[str, object]:
    return {"sgd": em.optim.SGD(momentum=0.9), "adam": em.optim.Adam()}


def main(out: str, backend: str = "gloo") -> None:
    group = ProcessGroup.from_env(backend, timeout_s=60)
    dev = group.device()
    where = f"cuda:{group.local_rank}" if backend == "nccl" else "cpu"
    want = em.Device.torch(where)
    assert dev == want and group.world_size == 2
    tdev = dev.b.device
    summed = group.all_reduce(
        [torch.full((2,), group.rank + 1.0, device=tdev), torch.tensor([group.rank], device=tdev)],
        average=False,
    )
    assert summed[0].tolist() == [3.0, 3.0] and summed[1].tolist() == [1]
    ddp = DistributedDataParallel(group, bucket_mb=200 / 2**20)  # ~200 bytes: several buckets
    result: dict[str, np.ndarray] = {}
    for name, opt in optimizers().items():
        em.seed(0 if group.rank == 0 else 7)  # rank 1 starts elsewhere; broadcast fixes it
        # built on the CPU (the reference's random stream), then forked to this rank's device
        net = Net(em.Device.torch("cpu").autodiff()).fork(dev.autodiff())
        model = group.broadcast_module(net)
        half = ROWS // group.world_size
        for step in range(STEPS):
            x, y = batch(step, dev)
            x, y = x.narrow(0, group.rank * half, half), y.narrow(0, group.rank * half, half)
            loss = nn.functional.cross_entropy(model(x), y)
            grads = ddp.backward(loss, model)
            model = opt.step(0.1, model, grads)  # type: ignore[attr-defined]
        for k, v in model.state_dict().items():
            result[f"{name}.{k}"] = v.to_numpy()
    if group.rank == 0:
        np.savez(out, **result)
    group.barrier()
    group.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
