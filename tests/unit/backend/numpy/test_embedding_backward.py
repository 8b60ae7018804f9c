"""The NumPy embedding gradient (sorted groups + reduceat) against np.add.at."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels.embedding import embedding_backward


def _add_at(grad: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, grad.shape[-1]), dtype=np.float64)
    np.add.at(out, idx.reshape(-1), grad.reshape(-1, grad.shape[-1]).astype(np.float64))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(
    ("n", "idx_shape", "d"), [(65, (16, 64), 128), (5, (7,), 3), (1000, (3, 4), 8), (4, (1,), 1)]
)
def test_matches_add_at(dtype: type, n: int, idx_shape: tuple[int, ...], d: int) -> None:
    rng = np.random.default_rng(0)
    idx = rng.integers(0, n, size=idx_shape)
    idx.reshape(-1)[: min(3, idx.size)] = 0  # repeated rows must sum
    grad = rng.normal(size=(*idx_shape, d)).astype(dtype)
    got = embedding_backward(grad, idx, n)
    assert got.dtype == dtype and got.shape == (n, d)
    tol = {np.float16: 2e-2, np.float32: 2e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(got, _add_at(grad, idx, n), rtol=tol, atol=tol)


def test_negative_indices_and_empty() -> None:
    rng = np.random.default_rng(1)
    idx = np.array([-1, 4, 0, -5, 2, 4])
    grad = rng.normal(size=(6, 3))
    np.testing.assert_allclose(embedding_backward(grad, idx, 5), _add_at(grad, idx, 5), atol=0)
    empty = embedding_backward(np.zeros((0, 3)), np.zeros((0,), np.int64), 4)
    assert empty.shape == (4, 3) and not empty.any()


def test_out_of_range_raises() -> None:
    with pytest.raises(IndexError):
        embedding_backward(np.ones((2, 3)), np.array([0, 9]), 4)
