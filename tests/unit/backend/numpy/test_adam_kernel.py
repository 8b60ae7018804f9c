"""The NumPy multi-tensor Adam kernel is bit-identical to the generic ``adam_many``."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.base import Backend
from ember.backend.numpy.backend import NumpyBackend
from ember.backend.numpy.kernels import adam as kernel


def _tensors(rng: np.random.Generator, dtype: type) -> list[np.ndarray]:
    return [np.asarray(rng.normal(size=s), dtype=dtype) for s in [(5, 3), (7,), (), (2, 3, 4)]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize(("weight_decay", "decoupled"), [(0.0, False), (0.1, False), (0.1, True)])
@pytest.mark.parametrize("donate", [False, True])
def test_bit_identical_to_generic(
    dtype: type, first: bool, weight_decay: float, decoupled: bool, donate: bool
) -> None:
    rng = np.random.default_rng(0)
    p, g = _tensors(rng, dtype), _tensors(rng, dtype)
    m = None if first else _tensors(rng, dtype)
    v = None if first else [np.abs(a, out=a) for a in _tensors(rng, dtype)]
    args = (1 if first else 7, 1e-2, 0.9, 0.999, 1e-8, weight_decay, decoupled)
    be = NumpyBackend()
    want = Backend.adam_many(be, p, g, m, v, *args)  # type: ignore[safe-super]
    keep = [[a.copy() for a in group] for group in (p, g, m or [], v or [])]
    got = kernel.adam_many(
        p,
        g,
        [a.copy() for a in m] if m else None,
        [a.copy() for a in v] if v else None,
        *args,
        donate,
    )
    assert got is not None
    for gl, wl in zip(got, want):
        for a, b in zip(gl, wl):
            assert isinstance(a, np.ndarray) and a.dtype == dtype and a.shape == b.shape
            assert np.array_equal(a, b)
    for group, kept in zip((p, g, m or [], v or []), keep):  # inputs unchanged
        assert all(np.array_equal(a, b) for a, b in zip(group, kept))


def test_donated_moments_are_updated_in_place() -> None:
    rng = np.random.default_rng(1)
    p, g, m = (_tensors(rng, np.float32) for _ in range(3))
    v = [np.abs(a, out=a) for a in _tensors(rng, np.float32)]
    out = kernel.adam_many(p, g, m, v, 3, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, True)
    assert out is not None
    assert all(a is b for a, b in zip(out[1], m)) and all(a is b for a, b in zip(out[2], v))


def test_mixed_dtypes_take_the_generic_kernel() -> None:
    rng = np.random.default_rng(2)
    p = [rng.normal(size=3).astype(np.float32), rng.normal(size=2)]
    g = [rng.normal(size=3).astype(np.float32), rng.normal(size=2)]
    assert kernel.adam_many(p, g, None, None, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False) is None
    new, _, _ = NumpyBackend().adam_many(p, g, None, None, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)
    assert [a.dtype for a in new] == [np.float32, np.float64]
