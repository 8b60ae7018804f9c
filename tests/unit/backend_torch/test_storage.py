"""Storage, dtypes, random numbers, devices and transfers of the torch backend."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember as em
from ember._core.device import parse_device

torch = pytest.importorskip("torch")

TORCH_CPU = em.Device.torch("cpu")
ALL_DTYPES = [em.float16, em.bfloat16, em.float32, em.float64, em.int32, em.int64, em.bool]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_numpy_round_trip_keeps_values_and_dtype(dtype: em.DType) -> None:
    a = np.array([[0.0, 1.5, -2.25], [3.0, 0.5, 7.0]])
    t = em.Tensor.from_data(a, device=TORCH_CPU, dtype=dtype)
    ref = em.Tensor.from_data(a, dtype=dtype)
    assert t.dtype is dtype
    out = t.to_numpy()
    assert out.dtype == ref.to_numpy().dtype
    np.testing.assert_array_equal(out, ref.to_numpy())


def test_from_data_copies_and_to_numpy_copies() -> None:
    a = np.ones((2, 2), dtype=np.float32)
    t = em.Tensor.from_data(a, device=TORCH_CPU)
    a[0, 0] = 5.0
    assert t.to_numpy()[0, 0] == 1.0
    out = t.to_numpy()
    out[0, 0] = 7.0
    assert t.to_numpy()[0, 0] == 1.0


def test_from_data_accepts_readonly_negative_strided_and_bf16_arrays() -> None:
    ro = np.broadcast_to(np.arange(3.0), (2, 3))
    rev = np.arange(6.0)[::-1]
    bf = np.arange(4.0).astype(ml_dtypes.bfloat16)
    for a in (ro, rev, bf):
        t = em.Tensor.from_data(a, device=TORCH_CPU)
        np.testing.assert_array_equal(t.to_numpy(), a)


def test_seed_makes_samples_reproducible() -> None:
    dist = em.Distribution.normal(0.0, 1.0)
    em.seed(7)
    a = em.Tensor.random((4, 5), dist, device=TORCH_CPU).to_numpy()
    em.seed(7)
    b = em.Tensor.random((4, 5), dist, device=TORCH_CPU).to_numpy()
    c = em.Tensor.random((4, 5), dist, device=TORCH_CPU).to_numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16, em.float32, em.float64])
def test_random_distributions_have_the_right_dtype_and_moments(dtype: em.DType) -> None:
    em.seed(0)
    u = em.Tensor.random((20000,), em.Distribution.uniform(2.0, 4.0), device=TORCH_CPU, dtype=dtype)
    n = em.Tensor.random((20000,), em.Distribution.normal(1.0, 2.0), device=TORCH_CPU, dtype=dtype)
    b = em.Tensor.random((20000,), em.Distribution.bernoulli(0.25), device=TORCH_CPU, dtype=dtype)
    assert u.dtype is n.dtype is b.dtype is dtype
    ua, na, ba = (x.to_numpy().astype(np.float64) for x in (u, n, b))
    assert 2.0 <= ua.min() and ua.max() <= 4.0 and abs(ua.mean() - 3.0) < 0.05
    assert abs(na.mean() - 1.0) < 0.1 and abs(na.std() - 2.0) < 0.1
    assert set(np.unique(ba)) <= {0.0, 1.0} and abs(ba.mean() - 0.25) < 0.02


def test_devices_parse_and_compare() -> None:
    assert parse_device("torch:cpu") == TORCH_CPU
    assert TORCH_CPU != em.Device.cpu()
    assert str(TORCH_CPU) == "torch:cpu"
    with pytest.raises(em.DeviceError, match="expected 'cpu', 'cuda' or 'cuda:i'"):
        em.Device.torch("gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_device_without_cuda_raises_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(em.DeviceError, match="CUDA"):
        em.Device.cuda()
    with pytest.raises(em.DeviceError, match="CUDA"):
        em.Device.torch("cuda:1")
    monkeypatch.setenv("EMBER_DEVICE", "cuda")
    with pytest.raises(em.DeviceError, match="CUDA"):
        em.default_device()


def test_numpy_to_torch_cpu_is_zero_copy_and_gradients_flow_back() -> None:
    src = em.Tensor.from_data(np.arange(6.0).reshape(2, 3), device=em.Device.cpu().autodiff())
    x = src.require_grad()
    y = x.to_device(TORCH_CPU)
    assert y.device == TORCH_CPU and y.is_tracked()
    assert np.shares_memory(y._data.numpy(), x._data)
    loss = (y * y).sum()
    g = x.grad(loss.backward())
    assert g is not None and g.device == em.Device.cpu()
    np.testing.assert_allclose(g.to_numpy(), 2 * np.arange(6.0).reshape(2, 3))


def test_torch_to_numpy_is_zero_copy_and_gradients_flow_back() -> None:
    x = em.Tensor.from_data([[1.0, -2.0]], device=TORCH_CPU.autodiff()).require_grad()
    y = x.to_device(em.Device.cpu())
    assert np.shares_memory(y._data, x._data.numpy())
    g = x.grad((y.exp() * 3.0).sum().backward())
    assert g is not None and g.device == TORCH_CPU
    np.testing.assert_allclose(g.to_numpy(), 3 * np.exp([[1.0, -2.0]]), rtol=1e-6)


def test_same_device_move_returns_an_equivalent_handle() -> None:
    x = em.Tensor.ones((2,), device=TORCH_CPU.autodiff()).require_grad()
    assert x.to_device(em.Device.torch("cpu")).is_require_grad()


def test_no_torch_tensor_ever_requires_grad() -> None:
    # ember's autodiff is in charge: even with torch grad mode on, torch records nothing
    with torch.enable_grad():
        d = TORCH_CPU.autodiff()
        w = em.Tensor.random((4, 3), em.Distribution.normal(0, 1), device=d).require_grad()
        x = em.Tensor.random((5, 4), em.Distribution.normal(0, 1), device=d)
        out = (x @ w).tanh().mean()
        g = w.grad(out.backward())
    assert g is not None
    for t in (w, x, out, g):
        assert not t._data.requires_grad and t._data.grad_fn is None


def test_bool_index_and_integer_matmul_match_numpy() -> None:
    a = np.arange(12).reshape(3, 4)
    for dev in (em.Device.cpu(), TORCH_CPU):
        t = em.Tensor.from_data(a, device=dev)
        np.testing.assert_array_equal((t @ t.transpose()).to_numpy(), a @ a.T)
        np.testing.assert_array_equal(t[1:, ::2].to_numpy(), a[1:, ::2])


def test_missing_torch_gives_a_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import ember.backend as backend_pkg
    from ember.backend import registry

    monkeypatch.delitem(registry._BACKENDS, "torch")
    monkeypatch.setattr(backend_pkg, "torch", backend_pkg.torch)
    for name in [m for m in sys.modules if m.startswith("ember.backend.torch")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(em.DeviceError, match=r"PyTorch backend is not available"):
        registry._load("torch")
