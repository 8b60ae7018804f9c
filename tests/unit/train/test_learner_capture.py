"""``Learner(..., capture=True)``: the same training as eager (the step through ``em.capture``),
with and without gradient accumulation; the configurations it refuses."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.train import Learner


class Net(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16, device=device)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(16, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(self.drop(nn.functional.relu(self.fc1(x))))


def _data(n: int = 72) -> ArrayDataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    return ArrayDataset(x, y)  # 72 rows: batches of 16 end in a batch of 8 (a second signature)


def _fit(device: em.Device, capture: bool, accumulation: int = 1) -> tuple[list[float], dict]:
    em.seed(0)
    model = Net(device.autodiff())
    train = DataLoader(_data(), batch_size=16, shuffle=True, seed=1, prefetch=0, device=device)
    valid = DataLoader(_data(32), batch_size=16, prefetch=0, device=device)
    sched = em.optim.lr.CosineAnnealing(0.05, 0.0, 50)
    clip = em.optim.GradientClipping.norm(1.0)
    learner = Learner(
        model, em.optim.AdamW(grad_clipping=clip), lr=sched, display="none",
        grad_accumulation=accumulation, capture=capture,
    )  # fmt: skip
    history = learner.fit(train, valid, epochs=3)
    losses = [r[k] for r in history for k in ("train_loss", "valid_loss", "train_accuracy")]
    weights = {n: p.val().to_numpy() for n, p in learner.model.named_parameters()}
    assert learner.steps == (15 if accumulation == 1 else 9)
    return losses, weights


@pytest.mark.parametrize("accumulation", [1, 2])
def test_captured_learner_equals_eager(device: em.Device, accumulation: int) -> None:
    want, want_w = _fit(device, False, accumulation)
    got, got_w = _fit(device, True, accumulation)
    if device.is_cuda:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert got == want
    for name, w in want_w.items():
        np.testing.assert_allclose(got_w[name], w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"precision": "fp16"}, "fp16"), ({"devices": [em.Device.cpu()]}, "one device")],
)
def test_capture_refuses_what_it_cannot_record(kw: dict, match: str) -> None:
    model = Net(em.Device.cpu().autodiff())
    with pytest.raises(ValueError, match=match):
        Learner(model, em.optim.SGD(), capture=True, display="none", **kw)
