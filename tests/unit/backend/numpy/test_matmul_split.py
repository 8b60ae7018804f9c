"""Matrix products split between the kernel pool's threads (kernels/matmul.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ember.backend.numpy.kernels import blas
from ember.backend.numpy.kernels import matmul as mm

# each at least _SPLIT_FLOPS multiply-adds, so that it is split
_CASES = [
    ((8, 128, 96), (96, 128)),  # (*, M, K) @ (K, N): the rows of the flattened batch
    ((16, 4, 64, 32), (16, 4, 32, 64)),  # batched, as attention's q @ k^T
    ((16, 1, 64, 32), (1, 4, 32, 64)),  # broadcast batch dims on both sides
    ((128, 64), (16, 64, 128)),  # a matrix against a batch
    ((512, 512), (512, 40)),  # one product, rows shared
    ((40, 1024), (1024, 256)),  # one product, columns shared (M < N)
]


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ys", _CASES)
def test_split_product_equals_numpy(
    xs: tuple[int, ...], ys: tuple[int, ...], dtype: type, threads: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    monkeypatch.setenv("EMBER_CONV", "numpy")  # else float32 matrices run on MLAS
    shares: list[int] = []
    real = mm._mm
    monkeypatch.setattr(mm, "_mm", lambda x, y, out: (shares.append(1), real(x, y, out)))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=xs).astype(dtype), rng.normal(size=ys).astype(dtype)
    got = mm.matmul(x, y)
    want = np.matmul(x, y)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert len(shares) == (0 if threads == "1" else int(threads))
    # each share is one BLAS call over the whole K: the same sums, at most the BLAS's own
    # blocking apart (a few ulps of the K-term sum)
    tol = 64 * np.finfo(dtype).eps * np.sqrt(xs[-1])
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_transposed_operands(monkeypatch: pytest.MonkeyPatch) -> None:
    # the weight gradient g^T @ x: a transposed (strided) left operand
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    rng = np.random.default_rng(1)
    g, x = rng.normal(size=(1024, 96)), rng.normal(size=(1024, 128))
    np.testing.assert_allclose(mm.matmul(g.T, x), g.T @ x, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(mm.matmul(x.T, g), x.T @ g, rtol=1e-12, atol=1e-10)


def test_shares_run_on_the_pool_with_the_blas_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    if not blas.threads():
        pytest.skip("no controllable BLAS library")
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    seen: list[tuple[str, list[int]]] = []
    lock = threading.Lock()
    real = mm._mm

    def spy(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        with lock:
            seen.append((threading.current_thread().name, blas.threads()))
        real(x, y, out)

    monkeypatch.setattr(mm, "_mm", spy)
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(512, 256)), rng.normal(size=(256, 256))
    np.testing.assert_allclose(mm.matmul(x, y), x @ y, rtol=1e-12, atol=1e-10)
    assert len(seen) == 2  # two shares, one on the calling thread and one on the pool's
    assert len({name for name, _ in seen}) == 2
    assert all(t == [1] * len(t) for _, t in seen)


def test_small_and_other_products_are_one_numpy_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    calls: list[int] = []
    monkeypatch.setattr(mm, "_mm", lambda x, y, out: calls.append(1))
    rng = np.random.default_rng(3)
    small = rng.normal(size=(8, 8)).astype(np.float32)
    np.testing.assert_array_equal(mm.matmul(small, small), small @ small)
    v = rng.normal(size=(300,))
    m = rng.normal(size=(300, 300))
    np.testing.assert_array_equal(mm.matmul(m, v), m @ v)  # 1-D operand
    h = m.astype(np.float16)
    np.testing.assert_array_equal(mm.matmul(h, h), h @ h)  # no BLAS for float16
    i = (m * 10).astype(np.int64)
    np.testing.assert_array_equal(mm.matmul(i, i), i @ i)
    assert calls == []
