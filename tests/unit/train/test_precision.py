"""``Learner(precision=...)`` and the autocast of stacked layers it relies on (issue 18)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember import nn
from ember.nn import functional as F
from ember.train import Learner
from ember.train.precision import Precision


class _Cnn(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, padding=1, device=device)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, device=device)
        self.fc = nn.Linear(4 * 6 * 6, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        h = F.relu(self.c2(F.relu(self.c1(x))))
        return self.fc(h.flatten(1))


def _batches(device: em.Device, n: int = 3) -> list[tuple[em.Tensor, em.Tensor]]:
    rng = np.random.default_rng(0)
    return [
        (
            em.Tensor.from_data(rng.normal(size=(8, 1, 6, 6)).astype(np.float32), device=device),
            em.Tensor.from_data(rng.integers(0, 3, size=8), device=device),
        )
        for _ in range(n)
    ]


class _Loader:
    def __init__(self, batches: list[tuple[em.Tensor, em.Tensor]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.batches)

    def state_dict(self) -> dict[str, int]:
        return {}

    def load_state_dict(self, state: dict[str, int]) -> None:
        pass


def test_two_convolutions_run_under_autocast(device: em.Device) -> None:
    """The second conv meets a bf16 activation and a float32 weight (raised DTypeError)."""
    model = _Cnn(device.autodiff())
    x = _batches(device, 1)[0][0]
    with em.amp.autocast(em.bfloat16):
        out = model(x)
    assert out.dtype is em.bfloat16
    grads = out.float().sum().backward()
    assert model.c1.weight.val().grad(grads).dtype is em.float32


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_learner_trains_in_mixed_precision(
    precision: str, device: em.Device, tmp_path: Path
) -> None:
    seen: list[em.DType] = []

    def step(model: nn.Module, batch: Sequence[em.Tensor]):  # type: ignore[no-untyped-def]
        logits = model(batch[0])
        seen.append(logits.dtype)
        return F.cross_entropy(logits, batch[1]), logits, batch[1]

    model = _Cnn(device.autodiff())
    before = model.fc.weight.val().to_numpy().copy()
    learner = Learner(
        model, em.optim.SGD(), lr=0.1, loss_fn=step, display="none", precision=precision,
        output_dir=tmp_path,
    )  # fmt: skip
    learner.fit(_Loader(_batches(device)), _Loader(_batches(device, 1)), epochs=1)
    low = em.bfloat16 if precision == "bf16" else em.float16
    assert seen == [low] * 4  # three training batches and one validation batch
    weight = learner.model.fc.weight.val()
    assert weight.dtype is em.float32 and not np.array_equal(weight.to_numpy(), before)
    # fp16 keeps the loss scale in the record; a resume restores it
    learner2 = Learner(
        _Cnn(device.autodiff()), em.optim.SGD(), lr=0.1, loss_fn=step, display="none",
        precision=precision, output_dir=tmp_path,
    )  # fmt: skip
    if precision == "fp16":
        assert learner._amp.scaler is not None and learner2._amp.scaler is not None
        learner._amp.scaler.scale_value = 1024.0
        learner.save_record()
        learner2.load_record(learner.latest_record())
        assert learner2._amp.scaler.scale_value == 1024.0


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0 on NumPy
def test_fp16_skips_a_step_whose_gradients_overflow() -> None:
    amp = Precision("fp16")
    assert amp.scaler is not None
    model = nn.Linear(2, 1, device=em.Device.cpu().autodiff())
    grads = em.optim.GradientsParams()
    for p in model.parameters():
        grads.register(p.id, em.Tensor.full(p.shape, float("inf")))
    before = amp.scaler.scale_value
    same = amp.step(em.optim.SGD(), 0.1, model, grads)
    assert same is model and amp.scaler.scale_value == before / 2


def test_bad_precision_is_a_clear_error() -> None:
    with pytest.raises(em.DTypeError, match="expected precision 'fp32', 'bf16' or 'fp16'"):
        Precision("fp8")
    amp = Precision("fp16")
    with pytest.raises(ValueError, match="not a positive scale"):
        amp.load_state_dict({"scale": -1.0, "clean_steps": 0})
