"""Float32 matrix products on MLAS (``kernels/ort_gemm.matmul``, taken by ``kernels/matmul.py``):
results against float64 NumPy for every layout the route takes, the bits at any thread count,
one MLAS thread inside a pool share, the declines, non-finite operands, and a linear layer's
three products through the backend."""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.backend import NumpyBackend
from ember.backend.numpy.kernels import matmul as mm
from ember.backend.numpy.kernels import ort_gemm
from ember.backend.numpy.kernels.threads import _serial

pytest.importorskip("onnxruntime")

U = 2.0**-24  # float32's unit roundoff


class Spy:
    """Records (transA, transB) and the thread count of each MLAS matrix product that ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[tuple[int, int], int]] = []
        run_into = ort_gemm._run_into

        def spy(build: Any, args: Any, feeds: Any, outputs: Any, threads: int) -> bool:
            ran = run_into(build, args, feeds, outputs, threads)
            if ran:
                self.calls.append((args, threads))
            return ran

        monkeypatch.setattr(ort_gemm, "_run_into", spy)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    monkeypatch.delenv("EMBER_CONV", raising=False)
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    return Spy(monkeypatch)


def _within_bound(got: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """|got - x @ y| <= 8 sqrt(K) u (|x| @ |y|) elementwise, the float64 product as the truth: a
    K-term float32 dot product's rounding errors of random sign grow as sqrt(K) u sum |x_i y_i|
    (Higham's probabilistic bound)."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert got.dtype == np.float32 and got.shape == np.matmul(x64, y64).shape
    bound = 8 * math.sqrt(x.shape[-1]) * U * np.matmul(np.abs(x64), np.abs(y64))
    excess = np.abs(got - np.matmul(x64, y64)) - bound
    assert float(excess.max(initial=0.0)) <= 0, f"above the bound by {excess.max():.3g}"


def _matrix(rng: np.random.Generator, rows: int, cols: int, transposed: bool) -> np.ndarray:
    """A (rows, cols) float32 matrix, C-ordered or the transpose of a C-ordered one."""
    if transposed:
        return rng.standard_normal((cols, rows), dtype=np.float32).T
    return rng.standard_normal((rows, cols), dtype=np.float32)


# (M, K, N): the GPT bench's forward, input-gradient and weight-gradient products, odd sizes
SHAPES = [(1024, 128, 384), (128, 1024, 65), (1024, 512, 128), (257, 129, 131), (33, 4099, 37)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_layouts_against_float64(shape: tuple[int, int, int], ta: int, tb: int, spy: Spy) -> None:
    m, k, n = shape
    rng = np.random.default_rng(m * 7 + n)
    x, y = _matrix(rng, m, k, bool(ta)), _matrix(rng, k, n, bool(tb))
    got = ort_gemm.matmul(x, y)
    assert got is not None
    _within_bound(got, x, y)
    assert spy.calls == [((ta, tb), 2)]


def test_rows_of_a_stack(spy: Spy) -> None:
    # a linear layer's (batch, T, K) input against W^T: the flattened rows, one product
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 64, 128), dtype=np.float32)
    w = rng.standard_normal((384, 128), dtype=np.float32)
    got = ort_gemm.matmul(x, w.T)  # None if the run failed (matmul.py would fall back)
    assert got is not None and got.shape == (16, 64, 384)
    _within_bound(got.reshape(1024, 384), x.reshape(1024, 128), w.T)
    assert spy.calls == [((0, 1), 2)]


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1)])
def test_bits_do_not_depend_on_the_thread_count(
    ta: int, tb: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMBER_CONV", raising=False)
    rng = np.random.default_rng(2)
    x, y = _matrix(rng, 1024, 384, bool(ta)), _matrix(rng, 384, 257, bool(tb))
    results = []
    for threads in ("1", "2", "3", "4"):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        results.append(mm.matmul(x, y))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_the_product_is_numpys_memory(spy: Spy) -> None:
    # written into a NumPy array, so tracemalloc (ember's memory tests, a user's profile)
    # counts it, unlike the arrays ORT's own run returns
    rng = np.random.default_rng(7)
    x, y = _matrix(rng, 1024, 256, False), _matrix(rng, 256, 512, False)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = mm.matmul(x, y)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert spy.calls == [((0, 0), 2)]
    assert out.nbytes <= held < out.nbytes + 65536
    assert out.flags.owndata and out.flags.c_contiguous


def test_one_mlas_thread_inside_a_pool_share(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    x, y = _matrix(rng, 512, 256, False), _matrix(rng, 256, 256, False)
    monkeypatch.setattr(_serial, "on", True, raising=False)
    _within_bound(mm.matmul(x, y), x, y)
    assert spy.calls == [((0, 0), 1)]


def test_declines(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    big = rng.standard_normal((512, 512), dtype=np.float32)
    small = rng.standard_normal((64, 64), dtype=np.float32)  # 262 K multiply-adds
    cases = [
        (small, small),  # below MIN_MACS
        (big[:, ::2], big[:256]),  # a strided (neither C- nor transposed-C-ordered) matrix
        (big.reshape(2, 256, 512), big.reshape(2, 512, 256)),  # a batched right operand
        (big.astype(np.float64), big.astype(np.float64)),  # float64 stays on OpenBLAS
        (big, big[:, 0]),  # a vector
        (big[:1], big),  # a single row: a matrix-vector product
    ]
    for x, y in cases:
        assert ort_gemm.matmul(x, y) is None
        np.testing.assert_allclose(mm.matmul(x, y), np.matmul(x, y), rtol=1e-5, atol=1e-3)
    monkeypatch.setenv("EMBER_CONV", "numpy")
    assert ort_gemm.matmul(big, big) is None
    assert spy.calls == []


def test_non_finite_operands_as_float64() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 200), dtype=np.float32)
    y = rng.standard_normal((200, 100), dtype=np.float32)
    x[3, 7], x[10, 0], y[5, 9] = np.inf, np.nan, -np.inf
    got = ort_gemm.matmul(x, y)
    assert got is not None
    with np.errstate(invalid="ignore"):  # inf - inf in the float64 sums
        want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))


def test_a_linear_layers_products_through_the_backend(spy: Spy) -> None:
    # forward x @ W^T + b, input gradient g @ W, weight gradient g^T @ x
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 64, 96), dtype=np.float32)
    w = rng.standard_normal((160, 96), dtype=np.float32)
    b = rng.standard_normal(160, dtype=np.float32)
    g = rng.standard_normal((8, 64, 160), dtype=np.float32)
    be = NumpyBackend()
    x2, g2 = x.reshape(-1, 96), g.reshape(-1, 160)
    np.testing.assert_array_equal(be.linear(x, w, b), be.matmul(x, w.T) + b)
    _within_bound(be.matmul(x, w.T).reshape(-1, 160), x2, w.T)
    _within_bound(be.matmul(g, w).reshape(-1, 96), g2, w)
    _within_bound(be.matmul(g2.T, x2), g2.T, x2)
    assert [flags for flags, _ in spy.calls] == [(0, 1)] * 3 + [(0, 0), (1, 0)]
