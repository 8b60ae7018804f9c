"""Creating tensors: constants, from data (dtype inference), ranges and random samples."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em


@pytest.mark.parametrize("make", ["zeros", "ones", "empty"])
def test_constant_constructors(device: em.Device, make: str) -> None:
    t = getattr(em.Tensor, make)((2, 3), device=device)
    assert t.shape == (2, 3) and t.dtype is em.float32 and t.device == device
    assert not t.is_autodiff()
    if make != "empty":
        np.testing.assert_array_equal(t.to_numpy(), np.full((2, 3), float(make == "ones")))
    i = getattr(em.Tensor, make)(4, device=device, dtype=em.int32)
    assert i.shape == (4,) and i.dtype is em.int32


@pytest.mark.parametrize(("value", "dtype"), [(1.5, em.float32), (3, em.int64), (True, em.bool)])
def test_full_infers_dtype_from_the_value(
    device: em.Device, value: object, dtype: em.DType
) -> None:
    t = em.Tensor.full((2, 2), value, device=device)  # type: ignore[arg-type]
    assert t.dtype is dtype
    np.testing.assert_array_equal(t.to_numpy(), np.full((2, 2), value))
    f = em.Tensor.full((2,), 2, device=device, dtype=em.float64)
    assert f.dtype is em.float64 and f.tolist() == [2.0, 2.0]


def test_like_constructors_keep_dtype_device_and_context(device: em.Device) -> None:
    x = em.Tensor.ones((2, 3), device=device.autodiff(), dtype=em.float64).require_grad()
    for t, v in (
        (em.Tensor.zeros_like(x), 0.0),
        (em.Tensor.ones_like(x), 1.0),
        (em.Tensor.full_like(x, 4.0), 4.0),
    ):
        assert t.shape == (2, 3) and t.dtype is em.float64 and t.device == device
        assert t.is_autodiff() and not t.is_tracked()
        np.testing.assert_array_equal(t.to_numpy(), np.full((2, 3), v))


@pytest.mark.parametrize(
    ("data", "dtype", "shape"),
    [
        (1.5, em.float32, ()),
        (3, em.int64, ()),
        (True, em.bool, ()),
        ([1.0, 2.0], em.float32, (2,)),
        ([[1, 2], [3, 4]], em.int64, (2, 2)),
        ([[True], [False]], em.bool, (2, 1)),
        ([1, 2.5], em.float32, (2,)),
        (np.zeros((2,), np.float64), em.float64, (2,)),
        (np.zeros((2,), np.float16), em.float16, (2,)),
        (np.zeros((2,), np.int32), em.int32, (2,)),
        (np.zeros((2,), np.uint8), em.int64, (2,)),
        (np.zeros((2,), np.bool_), em.bool, (2,)),
        (np.float64(2.0), em.float64, ()),
    ],
)
def test_from_data_infers_dtype(
    device: em.Device, data: object, dtype: em.DType, shape: tuple[int, ...]
) -> None:
    t = em.Tensor.from_data(data, device=device)
    assert t.dtype is dtype and t.shape == shape
    np.testing.assert_array_equal(t.to_numpy(), np.asarray(data))
    u = em.tensor(data, device=device)
    assert u.dtype is dtype and u.shape == shape


def test_tensor_constructor_is_from_data(device: em.Device) -> None:
    t = em.Tensor([[1, 2], [3, 4]], device=device.autodiff(), dtype=em.float64)
    assert t.dtype is em.float64 and t.shape == (2, 2) and t.is_autodiff()
    assert not t.is_tracked()
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_from_data_with_an_explicit_dtype(device: em.Device) -> None:
    for dt in (em.float16, em.bfloat16, em.float32, em.float64, em.int32, em.int64, em.bool):
        t = em.Tensor.from_data([0, 1, 1], device=device, dtype=dt)
        assert t.dtype is dt
        assert t.to_numpy().astype(np.float64).tolist() == [0.0, 1.0, 1.0]
    assert em.Tensor.from_data([1.7, -1.7], device=device, dtype=em.int64).tolist() == [1, -1]
    assert em.Tensor.from_data([1], device=device, dtype="float64").dtype is em.float64


def test_from_data_copies_its_source(device: em.Device) -> None:
    a = np.arange(4.0)
    t = em.Tensor.from_data(a, device=device)
    a[0] = 100.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    u = em.Tensor.from_data(t, device=device)
    assert u.tolist() == t.tolist()


def test_from_data_rejects_bad_input(device: em.Device) -> None:
    with pytest.raises(em.ShapeError, match="from_data"):
        em.Tensor.from_data([[1.0, 2.0], [3.0]], device=device)
    with pytest.raises((em.DTypeError, em.ShapeError), match="from_data"):
        em.Tensor.from_data(["a", "b"], device=device)
    with pytest.raises(em.DTypeError, match="from_data"):
        em.Tensor.from_data([1.0, float("nan")], device=device, dtype=em.int64)
    with pytest.raises(em.DTypeError, match="dtype"):
        em.Tensor.from_data([1.0], device=device, dtype="float8")


def test_creation_on_an_autodiff_device(device: em.Device) -> None:
    g = device.autodiff().gradient_checkpointing()
    for t in (
        em.Tensor.zeros((2,), device=g),
        em.Tensor.from_data([1.0], device=g),
        em.Tensor.arange(3, device=g),
        em.Tensor.random((2,), em.Distribution.normal(), device=g),
    ):
        assert t.is_autodiff() and not t.is_tracked()
        assert t.gradient_checkpointing_strategy() is em.GradientCheckpointingStrategy.Balanced


def test_arange(device: em.Device) -> None:
    assert em.Tensor.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    t = em.Tensor.arange(2, 10, 3, device=device)
    assert t.dtype is em.int64 and t.tolist() == [2, 5, 8]
    assert em.Tensor.arange(3, 0, -1, device=device).tolist() == [3, 2, 1]
    assert em.Tensor.arange(3, 3, device=device).shape == (0,)
    with pytest.raises(em.ShapeError, match="arange"):
        em.Tensor.arange(0, 5, 0, device=device)
    with pytest.raises(em.DTypeError, match="arange"):
        em.Tensor.arange(0.5, 5, device=device)  # type: ignore[arg-type]


def test_random_is_reproducible_with_seed(device: em.Device) -> None:
    dist = em.Distribution.normal(0.0, 1.0)
    em.seed(7)
    a = em.Tensor.random((3, 4), dist, device=device).to_numpy()
    b = em.Tensor.random((3, 4), dist, device=device).to_numpy()
    em.seed(7)
    c = em.Tensor.random((3, 4), dist, device=device).to_numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)


def test_uniform_samples(device: em.Device) -> None:
    em.seed(1)
    t = em.Tensor.random((20000,), em.Distribution.uniform(-1.0, 3.0), device=device)
    a = t.to_numpy()
    assert t.dtype is em.float32
    assert a.min() >= -1.0 and a.max() <= 3.0
    assert abs(a.mean() - 1.0) < 0.05 and abs(a.var() - 16 / 12) < 0.05


def test_normal_samples(device: em.Device) -> None:
    em.seed(2)
    d = em.Distribution.normal(2.0, 0.5)
    a = em.Tensor.random((20000,), d, device=device, dtype=em.float64).to_numpy()
    assert a.dtype == np.float64
    assert abs(a.mean() - 2.0) < 0.02 and abs(a.std() - 0.5) < 0.02


def test_bernoulli_samples(device: em.Device) -> None:
    em.seed(3)
    b = em.Tensor.random((20000,), em.Distribution.bernoulli(0.3), device=device, dtype=em.bool)
    assert b.dtype is em.bool
    assert abs(b.to_numpy().mean() - 0.3) < 0.02
    f = em.Tensor.random((100,), em.Distribution.bernoulli(0.5), device=device)
    assert set(np.unique(f.to_numpy()).tolist()) <= {0.0, 1.0}


def test_bad_distributions(device: em.Device) -> None:
    with pytest.raises(em.ShapeError, match="uniform"):
        em.Distribution.uniform(1.0, 0.0)
    with pytest.raises(em.ShapeError, match="normal"):
        em.Distribution.normal(0.0, -1.0)
    with pytest.raises(em.ShapeError, match="bernoulli"):
        em.Distribution.bernoulli(1.5)
    with pytest.raises(em.DTypeError, match="random"):
        em.Tensor.random((2,), em.Distribution.normal(), device=device, dtype=em.int64)
    with pytest.raises(TypeError, match="random"):
        em.Tensor.random((2,), "normal", device=device)


def test_bad_shapes(device: em.Device) -> None:
    with pytest.raises(em.ShapeError, match="zeros"):
        em.Tensor.zeros((2, -1), device=device)
    with pytest.raises(em.DTypeError, match="ones"):  # a wrong type, not a wrong size
        em.Tensor.ones("ab", device=device)
