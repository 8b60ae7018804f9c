"""Backend primitives, storage and engine helpers (run on every backend through ``device.b``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember as em
from ember.backend.numpy.backend import NumpyBackend
from ember.backend.numpy.special import erf_fallback
from ember.ops.registry import OPS

STORAGE = ["from_numpy", "to_numpy", "dtype_of", "is_float", "asarray", "cast", "full", "empty"]
STORAGE += ["arange", "copy", "seed", "uniform", "normal", "bernoulli", "scalar", "receive"]
ENGINE = ["sum_to_shape", "zeros_like", "ones_like", "index_put_zeros", "put_along_dim_zeros"]
ENGINE += ["take_along_dim", "split_sizes", "to_numpy_view"]


def test_numpy_backend_has_every_row_kernel_and_helper() -> None:
    rows = [name for name, spec in OPS.items() if spec.forward is None]
    missing = [n for n in rows + STORAGE + ENGINE if not callable(getattr(NumpyBackend, n, None))]
    assert not missing, f"NumpyBackend lacks {missing}"


@pytest.mark.parametrize(
    "dtype", [em.float16, em.bfloat16, em.float32, em.float64, em.int32, em.int64, em.bool]
)
def test_storage_round_trip_and_copies(device: em.Device, dtype: em.DType) -> None:
    b = device.b
    a = np.array([[0, 1, 1], [1, 0, 1]])
    x = b.from_numpy(a, dtype)
    assert b.dtype_of(x) is dtype
    assert b.is_float(x) == dtype.is_float
    back = b.to_numpy(x)
    np.testing.assert_array_equal(back.astype(np.float64), a)
    a[0, 0] = 7  # from_numpy copied
    back[0, 1] = 0  # to_numpy copied
    np.testing.assert_array_equal(b.to_numpy(x).astype(np.float64), [[0, 1, 1], [1, 0, 1]])
    assert b.dtype_of(b.cast(x, em.float64)) is em.float64


def test_creation_primitives(device: em.Device) -> None:
    b = device.b
    np.testing.assert_array_equal(b.to_numpy(b.full((2, 2), 3, em.int32)), np.full((2, 2), 3))
    assert b.dtype_of(b.full((2,), 1, em.float16)) is em.float16
    assert tuple(b.empty((3, 0), em.float32).shape) == (3, 0)
    np.testing.assert_array_equal(b.to_numpy(b.arange(1, 7, 2, em.int64)), [1, 3, 5])
    x = b.from_numpy(np.ones(3), em.float32)
    c = b.copy(x)
    assert c is not x
    np.testing.assert_array_equal(b.to_numpy(c), np.ones(3))


def test_seeded_generators(device: em.Device) -> None:
    b = device.b
    b.seed(5)
    u = b.to_numpy(b.uniform((100,), -1.0, 1.0, em.float64))
    n = b.to_numpy(b.normal((100,), 0.0, 1.0, em.float32))
    k = b.to_numpy(b.bernoulli((100,), 0.5, em.bool))
    b.seed(5)
    np.testing.assert_array_equal(b.to_numpy(b.uniform((100,), -1.0, 1.0, em.float64)), u)
    np.testing.assert_array_equal(b.to_numpy(b.normal((100,), 0.0, 1.0, em.float32)), n)
    np.testing.assert_array_equal(b.to_numpy(b.bernoulli((100,), 0.5, em.bool)), k)
    assert u.dtype == np.float64 and n.dtype == np.float32 and k.dtype == np.bool_
    assert -1.0 <= u.min() and u.max() <= 1.0


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ((2, 3, 4), (3, 4)),
        ((2, 3, 4), (1, 4)),
        ((2, 3, 4), (2, 1, 4)),
        ((2, 3, 4), (1, 1, 1)),
        ((2, 3, 4), ()),
        ((5,), (1,)),
        ((3, 4), (3, 4)),
    ],
)
def test_sum_to_shape(device: em.Device, src: tuple[int, ...], dst: tuple[int, ...]) -> None:
    b = device.b
    a = np.random.default_rng(0).normal(size=src)
    got = b.to_numpy(b.sum_to_shape(b.from_numpy(a, em.float64), dst))
    lead = len(src) - len(dst)
    want = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(i for i, n in enumerate(dst) if n == 1 and want.shape[i] != 1)
    want = want.sum(axis=axes, keepdims=True) if axes else want
    assert got.shape == dst
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_engine_helpers(device: em.Device) -> None:
    b = device.b
    g = b.from_numpy(np.array([[1.0, 2.0]]), em.float64)
    put = b.to_numpy(b.index_put_zeros((3, 2), (slice(1, 2),), g))
    np.testing.assert_array_equal(put, [[0, 0], [1, 2], [0, 0]])
    idx = b.from_numpy(np.array([[1], [0]]), em.int64)
    vals = b.from_numpy(np.array([[5.0], [6.0]]), em.float64)
    along = b.to_numpy(b.put_along_dim_zeros((2, 3), idx, vals, 1))
    np.testing.assert_array_equal(along, [[0, 5, 0], [6, 0, 0]])
    x = b.from_numpy(np.arange(6.0).reshape(2, 3), em.float64)
    np.testing.assert_array_equal(b.to_numpy(b.take_along_dim(x, idx, 1)), [[1.0], [3.0]])
    parts = b.split_sizes(x, [1, 2], 1)
    assert [tuple(p.shape) for p in parts] == [(2, 1), (2, 2)]
    np.testing.assert_array_equal(b.to_numpy(b.zeros_like(x)), np.zeros((2, 3)))
    np.testing.assert_array_equal(b.to_numpy(b.ones_like(x)), np.ones((2, 3)))
    assert b.receive(x, b) is x


def test_results_keep_the_input_dtype(device: em.Device) -> None:
    b = device.b
    for dt in (em.float16, em.float32):
        x = b.from_numpy(np.array([0.5, 2.0]), dt)
        for out in (
            b.powf_scalar(x, 3.0),
            b.powf_scalar(x, 2.0),
            b.powi_scalar(x, 3),
            b.mean(x),
            b.mean_dim(x, 0),
            b.sum(x),
            b.clamp(x, 0.6, None),
            b.where(b.greater(x, b.scalar(1.0, x)), x, b.scalar(0.0, x)),
            b.mul(x, b.scalar(3.5, x)),
        ):
            assert b.dtype_of(out) is dt
    i = b.from_numpy(np.array([1, 2]), em.int64)
    assert b.dtype_of(b.powi_scalar(i, 3)) is em.int64
    assert b.dtype_of(b.powi_scalar(i, -1)).is_float  # a negative power of an int is fractional


def test_reductions_are_0d_arrays(device: em.Device) -> None:
    b = device.b
    x = b.from_numpy(np.ones((2, 3)), em.float32)
    for out in (b.sum(x), b.mean(x)):
        assert isinstance(out, b.array_type) and tuple(out.shape) == ()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_accuracy(device: em.Device, dtype: type) -> None:
    b = device.b
    z = np.concatenate([np.linspace(-6, 6, 241), [0.0, 1e-8, -1e-8, 2.4999, 2.5, 2.5001, 30.0]])
    want = np.array([math.erf(v) for v in z])
    got = b.to_numpy(
        b.erf(b.from_numpy(z.astype(dtype), em.float32 if dtype is np.float32 else em.float64))
    )
    tol = 1e-15 if dtype is np.float64 else 1e-7
    np.testing.assert_allclose(got, want.astype(dtype), rtol=4 * tol, atol=tol)


def test_erf_fallback_without_scipy() -> None:
    z = np.concatenate([np.linspace(-6, 6, 241), [0.0, 1e-12, 2.4999, 2.5, 2.5001, 40.0]])
    want = np.array([math.erf(v) for v in z])
    np.testing.assert_allclose(erf_fallback(z), want, rtol=1e-14, atol=1e-15)
    assert erf_fallback(z.astype(np.float32)).dtype == np.float32
