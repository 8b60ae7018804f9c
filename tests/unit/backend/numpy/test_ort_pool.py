"""The ONNX Runtime route of the NumPy max-pool forward (``kernels/ort_pool.py``): its results
against ember's own kernel over a seeded sweep of geometries (a max is exact, so bit for bit),
the batch split, and the inputs it declines (a NaN, other dtypes, the route off)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import ort_pool, pooling
from ember.backend.numpy.kernels.pool_windows import pool_geometry

pytest.importorskip("onnxruntime")

CASES = [  # shape, kernel, stride, padding, dilation, ceil mode
    ((4, 6, 28, 28), (2, 2), (2, 2), (0, 0), (1, 1), False),  # LeNet's tiled 2x2
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1), (1, 1), True),  # a last, partial window
    ((2, 3, 5, 7), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((1, 2, 6, 5), (3, 3), (2, 2), (1, 1), (1, 1), True),  # the last window starts in padding
    ((2, 3, 9, 9), (3, 2), (1, 2), (1, 0), (2, 1), False),  # dilated, overlapping
    ((3, 2, 8, 6), (2, 3), (1, 1), (1, 1), (1, 1), False),
    ((1, 1, 4, 4), (4, 4), (4, 4), (0, 0), (1, 1), False),
]


def _ember(x: np.ndarray, case: Any, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    """ember's own kernel (the route off)."""
    _, k, s, p, d, ceil = case
    with monkeypatch.context() as m:
        m.setenv("EMBER_CONV", "numpy")
        return pooling.max_pool2d(x, k, s, p, d, ceil)


def _ort(x: np.ndarray, case: Any) -> np.ndarray | None:
    _, k, s, p, d, ceil = case
    return ort_pool.max_pool2d(x, k, s, p, d, ceil, pool_geometry(x.shape, k, s, p, d, ceil))


@pytest.fixture(autouse=True)
def _route_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_CONV", raising=False)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}")
def test_the_mlas_pool_matches_embers_kernel_bit_for_bit(
    case: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(case[0], dtype=np.float32)
    x[0, 0, 1, :] = -np.inf  # -inf beside finite values
    x[-1, -1, :3, :3] = 1.5  # ties
    got = _ort(x, case)
    assert got is not None, "the route declined a NaN-free float32 input"
    want = _ember(x, case, monkeypatch)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got, want)
    assert np.array_equal(pooling.max_pool2d(x, *case[1:]), want)  # the kernel answers the same


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_a_large_batch_split_between_threads_gives_the_same_bits(
    threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    rng = np.random.default_rng(1)
    case = ((8, 16, 96, 96), (2, 2), (2, 2), (0, 0), (1, 1), False)
    assert np.prod(case[0]) >= ort_pool._SPLIT_ELEMS  # large enough to split
    x = rng.standard_normal(case[0], dtype=np.float32)
    got = _ort(x, case)
    assert got is not None and np.array_equal(got, _ember(x, case, monkeypatch))


@pytest.mark.parametrize("tap", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_a_nan_anywhere_in_a_window_is_the_windows_maximum(
    tap: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # MLAS drops a NaN that is not a window's last tap: the route declines such an input
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 6), dtype=np.float32)
    x[1, 2, 2 + tap[0], 4 + tap[1]] = np.nan
    case = ((2, 3, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1), False)
    assert _ort(x, case) is None
    y = pooling.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1))
    assert np.isnan(y[1, 2, 1, 2]) and np.isnan(y).sum() == 1
    assert np.array_equal(y, _ember(x, case, monkeypatch), equal_nan=True)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_window_of_minus_infinity_stays_minus_infinity(
    case: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MLAS starts a window that reads padding at float32's lowest value: such an output is
    # declined and recomputed; a window without padding gives -inf on MLAS too
    rng = np.random.default_rng(3)
    x = rng.standard_normal(case[0], dtype=np.float32)
    x[0, 0] = -np.inf  # a whole plane: every window of it holds only -inf (and padding)
    got = _ort(x, case)
    assert got is None or np.array_equal(got, _ember(x, case, monkeypatch))
    y = pooling.max_pool2d(x, *case[1:])
    assert np.all(y[0, 0] == -np.inf) and np.isfinite(y[1:]).all()
    assert np.array_equal(y, _ember(x, case, monkeypatch))


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_dtypes_stay_on_embers_kernel(dtype: type) -> None:
    x = np.ones((1, 1, 4, 4), dtype=dtype)
    assert _ort(x, CASES[0]) is None


def test_the_route_is_off_with_ember_conv_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_CONV", "numpy")
    assert _ort(np.ones((1, 1, 4, 4), dtype=np.float32), CASES[0]) is None


def test_an_empty_batch_stays_on_embers_kernel() -> None:
    x = np.ones((0, 2, 4, 4), dtype=np.float32)
    assert _ort(x, CASES[0]) is None
    assert pooling.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1)).shape == (0, 2, 2, 2)
