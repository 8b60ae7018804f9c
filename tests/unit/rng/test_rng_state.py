"""``em.Generator``, ``em.get_rng_state`` / ``em.set_rng_state``, and training records that
restore the RNG state so a resumed run with dropout is bit for bit the uninterrupted one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember import nn
from ember.optim import AdamW, GradientsParams
from ember.record import RecordError, load_training, save_training

U = em.Distribution.uniform(0.0, 1.0)


def _devices() -> list[em.Device]:
    out = [em.Device.cpu()]
    try:
        import torch  # noqa: F401
    except ImportError:
        return out
    return [*out, em.Device.torch("cpu")]


DEVICES = _devices()
IDS = ["numpy", "torch-cpu"][: len(DEVICES)]


class _Mlp(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.l1 = nn.Linear(6, 16, device=device)
        self.drop = nn.Dropout(0.4)
        self.l2 = nn.Linear(16, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.l2(self.drop(F.relu(self.l1(x))))


def _step(model: _Mlp, optim: AdamW, x: em.Tensor, y: em.Tensor) -> tuple[_Mlp, float]:
    loss = F.cross_entropy(model(x), y)
    value = float(loss.item())
    return optim.step(1e-2, model, GradientsParams.from_grads(loss.backward(), model)), value


@pytest.mark.parametrize("device", DEVICES, ids=IDS)
def test_a_resumed_dropout_run_is_bit_for_bit_the_uninterrupted_one(
    device: em.Device, tmp_path: Path
) -> None:
    ad = device.autodiff()
    rng = np.random.default_rng(0)
    batches = [
        (em.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=ad),
         em.tensor(rng.integers(0, 3, 8), device=ad))
        for _ in range(4)
    ]  # fmt: skip
    em.seed(0)
    model, optim = _Mlp(ad), AdamW()
    losses = []
    for i, (x, y) in enumerate(batches):
        model, loss = _step(model, optim, x, y)
        losses.append(loss)
        if i == 1:
            save_training(tmp_path / "step2.safetensors", model, optim, step=2)
    final = {n: t.to_numpy() for n, t in model.state_dict().items()}

    em.seed(123)  # a fresh process: other seed, other draws, a new model and optimizer
    em.Tensor.random((5,), U, device=device)
    fresh, fresh_optim = _Mlp(ad), AdamW()
    assert load_training(tmp_path / "step2.safetensors", fresh, fresh_optim) == 2
    resumed = []
    for x, y in batches[2:]:
        fresh, loss = _step(fresh, fresh_optim, x, y)
        resumed.append(loss)
    assert resumed == losses[2:]
    for name, t in fresh.state_dict().items():
        np.testing.assert_array_equal(t.to_numpy(), final[name], err_msg=name)


@pytest.mark.parametrize("device", DEVICES, ids=IDS)
def test_get_and_set_rng_state_repeat_the_default_draws(device: em.Device) -> None:
    em.seed(5)
    state = em.get_rng_state()
    json.dumps(state)  # JSON-ready, as records store it
    a = F.dropout(em.Tensor.ones((64,), device=device), 0.5).to_numpy()
    em.set_rng_state(json.loads(json.dumps(state)))
    b = F.dropout(em.Tensor.ones((64,), device=device), 0.5).to_numpy()
    np.testing.assert_array_equal(a, b)
    assert 0 < (a == 0).sum() < 64


@pytest.mark.parametrize("device", DEVICES, ids=IDS)
def test_a_generator_is_its_own_stream(device: em.Device) -> None:
    em.seed(1)
    default_next = em.Tensor.random((6,), U, device=device).to_numpy()
    em.seed(1)
    g = em.Generator(42)
    a = em.Tensor.random((6,), U, device=device, generator=g).to_numpy()
    # the default generator did not move: its next draw is the one it gave before
    np.testing.assert_array_equal(em.Tensor.random((6,), U, device=device).to_numpy(), default_next)
    b = em.Tensor.random((6,), U, device=device, generator=em.Generator(42)).to_numpy()
    np.testing.assert_array_equal(a, b)
    state = g.get_state()
    c = F.dropout(em.Tensor.ones((32,), device=device), 0.5, generator=g).to_numpy()
    g.set_state(json.loads(json.dumps(state)))
    d = nn.Dropout(0.5, generator=g)(em.Tensor.ones((32,), device=device)).to_numpy()
    np.testing.assert_array_equal(c, d)
    g.manual_seed(42)
    np.testing.assert_array_equal(
        em.Tensor.random((6,), U, device=device, generator=g).to_numpy(), a
    )
    assert g.initial_seed() == 42
    assert not np.array_equal(a, em.Tensor.random((6,), U, generator=em.Generator(43)).to_numpy())


def test_bad_generators_and_states_raise_ember_errors() -> None:
    with pytest.raises(em.DTypeError, match=r"em\.Generator"):
        em.Tensor.random((2,), U, generator=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(em.EmberError, match="seed"):
        em.Generator(-1)
    with pytest.raises(em.ShapeError, match="get_rng_state"):
        em.set_rng_state({"nope": {}})
    with pytest.raises(em.ShapeError, match=r"numpy:cpu.*does not fit"):
        em.set_rng_state({"numpy:cpu": {"torch": "AAAA"}})
    with pytest.raises(em.ShapeError, match=r"g\.get_state\(\)"):
        em.Generator(0).set_state({"seed": "x"})


def test_a_damaged_rng_field_in_a_record_raises_record_error(tmp_path: Path) -> None:
    from ember.record.io import decode, encode, read_bytes

    model = _Mlp(em.Device.cpu().autodiff())
    path = tmp_path / "r.safetensors"
    save_training(path, model)
    arrays, meta = decode("t", path, read_bytes("t", path))
    meta = {**meta, "rng": json.dumps({"numpy:cpu": {"bad": 1}})}
    meta.pop("checksum", None)
    path.write_bytes(encode({k: em.tensor(v) for k, v in arrays.items()}, meta))
    target = _Mlp(em.Device.cpu().autodiff())
    before = em.get_rng_state()
    with pytest.raises(RecordError, match="RNG state"):
        load_training(path, target)
    assert em.get_rng_state() == before
