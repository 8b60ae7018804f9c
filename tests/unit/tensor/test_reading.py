"""Reading tensors: shape, dtype, values, conversions and repr."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

A = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], dtype=np.float32)


def test_shape_ndim_dtype_numel(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert t.ndim == 2 and t.dtype is em.float32 and t.numel() == 6
    s = em.Tensor.from_data(2.0, device=device)
    assert s.shape == () and s.ndim == 0 and s.numel() == 1


def test_item(device: em.Device) -> None:
    f = em.Tensor.from_data([2.5], device=device).item()
    i = em.Tensor.from_data([[3]], device=device).item()
    b = em.Tensor.from_data(True, device=device).item()
    assert f == 2.5 and type(f) is float
    assert i == 3 and type(i) is int
    assert b is True
    with pytest.raises(em.ShapeError, match="item"):
        em.Tensor.from_data(A, device=device).item()


def test_tolist(device: em.Device) -> None:
    assert em.Tensor.from_data(A, device=device).tolist() == A.tolist()
    assert em.Tensor.from_data([True, False], device=device).tolist() == [True, False]
    assert em.Tensor.from_data(7, device=device).tolist() == 7


def test_to_numpy_is_a_copy(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    a = t.to_numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    a[0, 0] = 100.0
    np.testing.assert_array_equal(t.to_numpy(), A)


def test_numpy_asarray(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    np.testing.assert_array_equal(np.asarray(t), A)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    half = em.Tensor.from_data(A, device=device, dtype=em.bfloat16)
    np.testing.assert_array_equal(np.asarray(half).astype(np.float32), A)


def test_python_conversions(device: em.Device) -> None:
    assert float(em.Tensor.from_data([1.5], device=device)) == 1.5
    assert int(em.Tensor.from_data(3, device=device)) == 3
    assert bool(em.Tensor.from_data(True, device=device)) is True
    idx = em.Tensor.from_data(2, device=device)
    assert [10, 20, 30][idx] == 30
    with pytest.raises(em.DTypeError, match="__index__"):
        [1, 2][em.Tensor.from_data(1.0, device=device)]


def test_len_and_iteration(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    assert len(t) == 2
    rows = [r.tolist() for r in t]
    assert rows == A.tolist()
    with pytest.raises(em.ShapeError, match="len"):
        len(em.Tensor.from_data(1.0, device=device))


def test_repr(device: em.Device) -> None:
    plain = repr(em.Tensor.from_data(A, device=device))
    assert plain.startswith("Tensor(") and "-6." in plain and "float32" in plain
    assert str(device) in plain and "autodiff" not in plain
    x = em.Tensor.from_data(A, device=device.autodiff())
    assert "autodiff=Disabled" in repr(x) and "untracked" in repr(x)
    r = x.require_grad()
    assert "require_grad" in repr(r)
    assert "tracked" in repr(r * 2.0)
    big = repr(em.Tensor.zeros((100, 100), device=device))
    assert "..." in big and len(big) < 2000


def test_device_property(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    assert t.device == device and not t.device.is_autodiff()
