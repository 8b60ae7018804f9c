"""Data parallelism in one process: replicas in worker threads equal the full-batch step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import ember as em
from ember import nn
from ember.data import ArrayDataset, DataLoader
from ember.distributed import DataParallel, split_batch
from ember.errors import DeviceError, EmberError
from ember.train import Learner, classification_step

F64 = em.float64
PAIRS = {
    "numpy+torch": lambda: [em.Device.cpu(), em.Device.torch("cpu")],
    "torch+numpy": lambda: [em.Device.torch("cpu"), em.Device.cpu()],
    "numpy+numpy": lambda: [em.Device.cpu(), em.Device.cpu()],
    "three": lambda: [em.Device.cpu(), em.Device.torch("cpu"), em.Device.cpu()],
}


class Net(nn.Module):
    def __init__(self, device: em.Device, dtype: em.DType = F64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8, device=device, dtype=dtype)
        self.fc2 = nn.Linear(8, 3, device=device, dtype=dtype)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(nn.functional.tanh(self.fc1(x)))


def _batch(n: int, seed: int, device: em.Device) -> list[em.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    y = rng.integers(0, 3, size=n)
    return [em.Tensor.from_data(x, device=device), em.Tensor.from_data(y, device=device)]


def _params(model: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.to_numpy() for k, v in model.state_dict().items()}


def _optimizer(name: str) -> object:
    return em.optim.SGD(momentum=0.9) if name == "sgd" else em.optim.Adam()


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("pair", list(PAIRS), ids=list(PAIRS))
def test_parallel_steps_equal_full_batch_steps(pair: str, opt: str) -> None:
    devices = PAIRS[pair]()
    main = devices[0]
    em.seed(0)
    single = Net(main.autodiff())
    parallel = single.fork(main)
    dp = DataParallel(devices)
    single_opt, parallel_opt = _optimizer(opt), _optimizer(opt)
    try:
        for step in range(4):
            batch = _batch(11, step, main)  # 11 rows: uneven shards
            loss, _, _ = classification_step(single, batch)
            grads = em.optim.GradientsParams.from_grads(loss.backward(), single)
            single = single_opt.step(0.1, single, grads)  # type: ignore[attr-defined]
            out = dp.backward(parallel, batch, classification_step, outputs=True)
            assert out.n == 11 and out.logits is not None and out.logits.shape == (11, 3)
            assert out.targets is not None and out.targets.shape == (11,)
            np.testing.assert_allclose(out.loss, loss.item(), rtol=1e-12)
            parallel = parallel_opt.step(0.1, parallel, out.grads)  # type: ignore[attr-defined]
    finally:
        dp.close()
    assert parallel.devices() == [main]
    want, got = _params(single), _params(parallel)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)
    assert not np.allclose(want["fc1.weight"], _params(Net(main.autodiff()))["fc1.weight"])


def test_scale_and_main_model_elsewhere() -> None:
    em.seed(1)
    model = Net(em.Device.cpu().autodiff())
    dp = DataParallel([em.Device.torch("cpu"), em.Device.cpu()])
    placed = dp.place(model)
    assert placed.devices() == [em.Device.torch("cpu")] and model.devices() == [em.Device.cpu()]
    batch = _batch(6, 3, em.Device.cpu())  # the batch may live on any device
    full, _, _ = classification_step(model, batch)
    want = em.optim.GradientsParams.from_grads(full.backward(), model)
    got = dp.backward(placed, batch, classification_step, scale=0.25).grads
    dp.close()
    assert len(got) == len(want) == 4
    for p in model.parameters():
        g = got.get(p.id)
        assert g is not None and g.device == em.Device.torch("cpu")
        np.testing.assert_allclose(g.to_numpy(), 0.25 * want.get(p.id).to_numpy(), rtol=1e-10)  # type: ignore[union-attr]


def test_fewer_rows_than_devices_and_split_batch() -> None:
    x = em.Tensor.from_data(np.arange(10.0).reshape(5, 2))
    y = em.Tensor.from_data(np.arange(5))
    shards = split_batch([x, y], 3)
    assert [s[0].shape[0] for s in shards] == [2, 2, 1]
    np.testing.assert_array_equal(np.concatenate([s[1].to_numpy() for s in shards]), np.arange(5))
    assert len(split_batch([x, y], 8)) == 5
    with pytest.raises(EmberError, match="split_batch"):
        split_batch([x, y.narrow(0, 0, 4)], 2)
    em.seed(2)
    model = Net(em.Device.cpu().autodiff())
    dp = DataParallel([em.Device.cpu()] * 4)
    batch = _batch(2, 0, em.Device.cpu())
    full, _, _ = classification_step(model, batch)
    want = em.optim.GradientsParams.from_grads(full.backward(), model)
    got = dp.backward(model, batch, classification_step).grads
    dp.close()
    for p in model.parameters():
        np.testing.assert_allclose(got.get(p.id).to_numpy(), want.get(p.id).to_numpy())  # type: ignore[union-attr]


def test_rejects_bad_devices() -> None:
    with pytest.raises(DeviceError, match="DataParallel"):
        DataParallel([])
    with pytest.raises(DeviceError, match="DataParallel"):
        DataParallel(["cpu"])  # type: ignore[list-item]


def _data(n: int = 96) -> ArrayDataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    return ArrayDataset(x, y)


def _fit(
    devices: Sequence[em.Device] | None, **kw: object
) -> tuple[Learner, list[dict[str, float]]]:
    em.seed(0)
    model = Net(em.Device.cpu().autodiff(), em.float32)
    train = DataLoader(_data(), batch_size=16, shuffle=True, seed=1, prefetch=0)
    valid = DataLoader(_data(32), batch_size=16, prefetch=0)
    learner = Learner(model, em.optim.Adam(), lr=0.05, display="none", devices=devices, **kw)
    return learner, learner.fit(train, valid, epochs=4)


def test_learner_with_devices_learns_and_matches_single_device() -> None:
    learner, history = _fit([em.Device.torch("cpu"), em.Device.cpu()])
    assert history[-1]["train_loss"] < 0.7 * history[0]["train_loss"]
    assert history[-1]["valid_accuracy"] > 0.7
    assert learner.model.devices() == [em.Device.torch("cpu")]
    _, single = _fit(None)
    for got, want in zip(history, single):
        for key in ("train_loss", "train_accuracy", "valid_loss"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-4, err_msg=key)


def test_learner_with_devices_and_grad_accumulation() -> None:
    _, history = _fit([em.Device.cpu(), em.Device.cpu()], grad_accumulation=2)
    _, single = _fit(None, grad_accumulation=2)
    for got, want in zip(history, single):
        np.testing.assert_allclose(got["train_loss"], want["train_loss"], rtol=1e-4)
