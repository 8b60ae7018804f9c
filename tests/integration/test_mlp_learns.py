"""End to end: a tiny MLP learns a nonlinear problem with em.nn, em.optim and em.optim.lr."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.nn import functional as F


class Mlp(em.nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.l1 = em.nn.Linear(2, 32, device=device)
        self.l2 = em.nn.Linear(32, 2, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.l2(F.relu(self.l1(x)))


def _data(n: int = 256) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
    y = ((x[:, 0] * x[:, 1]) > 0).astype(np.int64)  # XOR of the signs: not linearly separable
    return x, y


@pytest.mark.slow
@pytest.mark.parametrize("checkpointing", [False, True], ids=["disabled", "balanced"])
def test_mlp_learns_xor(device: em.Device, checkpointing: bool) -> None:
    em.seed(0)
    dev = device.autodiff()
    if checkpointing:
        dev = dev.gradient_checkpointing()
    model = Mlp(dev)
    optim = em.optim.AdamW(weight_decay=1e-4)
    sched = em.optim.lr.Composed(
        [
            (em.optim.lr.Linear(1e-3, 2e-2, 20), 20),
            (em.optim.lr.CosineAnnealing(2e-2, 1e-3, 280), 280),
        ]
    )
    x_np, y_np = _data()
    x = em.Tensor.from_data(x_np, device=dev)
    y = em.Tensor.from_data(y_np, device=dev)
    first = None
    for _ in range(300):
        loss = F.cross_entropy(model(x), y)
        first = loss.item() if first is None else first
        grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
        model = optim.step(next(sched), model, grads)
    model.valid()
    pred = model(x.without_autodiff()).argmax(1).to_numpy().reshape(-1)
    assert (pred == y_np).mean() > 0.95
    assert F.cross_entropy(model(x.without_autodiff()), y.without_autodiff()).item() < 0.3 * first
