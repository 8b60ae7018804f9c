"""The max-pool backward reads the window maxima of its forward (``pooling._maxima``): the same
bits as finding them again, for every geometry; entries go with their arrays."""

from __future__ import annotations

import gc
import itertools

import numpy as np
import pytest

from ember.backend.numpy.kernels import ort_conv, pooling
from ember.backend.numpy.kernels.memo import Memo

pytestmark = pytest.mark.skipif(
    not ort_conv._on(np.ones(1, np.float32)), reason="needs onnxruntime (MLAS pooling)"
)

Geo = tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int], bool]


def _geometries() -> list[Geo]:
    """Disjoint and tiled windows, gaps between them, overlaps, padding, dilation, ceil mode."""
    out = []
    for k, s, p, d, ceil in itertools.product(
        [(2, 2), (3, 3), (2, 3), (1, 1)],
        [(1, 1), (2, 2), (3, 2)],
        [(0, 0), (1, 1), (1, 0)],
        [(1, 1), (2, 1)],
        [False, True],
    ):
        if 2 * p[0] <= k[0] and 2 * p[1] <= k[1]:
            out.append((k, s, p, d, ceil))
    return out


def _input(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Small integers (many windows tie, where the first tap takes the gradient), some -inf."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, size=shape).astype(np.float32)
    x[0, 0, 0, :3] = -np.inf
    return x


def _forbid_search(monkeypatch: pytest.MonkeyPatch) -> None:
    def searched(*args: object) -> None:
        raise AssertionError("the backward searched the maxima again")

    monkeypatch.setattr(pooling, "_firsts", searched)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_the_backward_reads_the_forward_maxima(
    threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    read = 0
    for i, (k, s, p, d, ceil) in enumerate(_geometries()):
        for shape in [(3, 4, 9, 11), (2, 3, 8, 8)]:
            out = pooling.pool_geometry(shape, k, s, p, d, ceil)
            if min(out) <= 0:
                continue
            x = _input(shape, i)
            y = pooling.max_pool2d(x, k, s, p, d, ceil)
            g = np.random.default_rng(100 + i).standard_normal(y.shape).astype(np.float32)
            again = pooling.max_pool2d_backward(g, x.copy(), k, s, p, d, ceil)  # no entry
            if pooling._maxima.get(x, (k, s, p, d, ceil)) is None:
                continue  # MLAS declined (a window of -inf): the forward kept nothing
            with monkeypatch.context() as m:
                _forbid_search(m)
                got = pooling.max_pool2d_backward(g, x, k, s, p, d, ceil)
            np.testing.assert_array_equal(got, again)
            read += 1
    assert read > 100  # most geometries were served from the forward


def test_large_batches_split_with_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``_SPLIT_BACKWARD`` the shares read their rows of the kept maxima."""
    rng = np.random.default_rng(7)
    x = np.maximum(rng.standard_normal((64, 32, 28, 28), dtype=np.float32), 0)  # ReLU's ties
    assert x.size >= pooling._SPLIT_BACKWARD
    geo = ((2, 2), (2, 2), (0, 0), (1, 1))
    y = pooling.max_pool2d(x, *geo)
    g = rng.standard_normal(y.shape, dtype=np.float32)
    want = pooling.max_pool2d_backward(g, x.copy(), *geo)
    _forbid_search(monkeypatch)
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        np.testing.assert_array_equal(pooling.max_pool2d_backward(g, x, *geo), want)


def test_each_geometry_keeps_its_own_maxima() -> None:
    x = _input((2, 3, 12, 12), 1)
    small, large = ((2, 2), (2, 2), (0, 0), (1, 1), False), ((3, 3), (3, 3), (1, 1), (1, 1), False)
    ys = [pooling.max_pool2d(x, *geo) for geo in (small, large)]
    for geo, y in zip((small, large), ys, strict=True):
        g = np.ones_like(y)
        want = pooling.max_pool2d_backward(g, x.copy(), *geo)
        np.testing.assert_array_equal(pooling.max_pool2d_backward(g, x, *geo), want)


def test_maxima_go_with_their_array() -> None:
    x = _input((2, 3, 8, 8), 2)
    gc.collect()  # entries of arrays that earlier tests dropped go first
    held = len(pooling._maxima)
    pooling.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1))
    assert len(pooling._maxima) == held + 1
    del x
    gc.collect()
    assert len(pooling._maxima) == held


def test_an_input_with_nan_keeps_nothing() -> None:
    """NumPy's kernel pools it (MLAS would drop the NaN); the backward finds the maxima itself,
    NaN counting as a window's maximum."""
    x = _input((2, 3, 8, 8), 3)
    x[1, 2, 5, 4] = np.nan
    y = pooling.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1))
    assert np.isnan(y[1, 2, 2, 2])
    assert pooling._maxima.get(x, ((2, 2), (2, 2), (0, 0), (1, 1), False)) is None
    gx = pooling.max_pool2d_backward(np.ones_like(y), x, (2, 2), (2, 2), (0, 0), (1, 1))
    assert gx[1, 2, 5, 4] == 1 and gx[1, 2, 4:6, 4:6].sum() == 1


def test_memo_entries() -> None:
    m = Memo()
    a, b = np.zeros(2), np.zeros(2)
    m.put(a, ("k", 1), "first")
    m.put(a, ("k", 1), "second")  # the same call again replaces it
    m.put(a, ("k", 2), "other")
    assert m.get(a, ("k", 1)) == "second" and m.get(a, ("k", 2)) == "other"
    assert m.get(b, ("k", 1)) is None  # an equal array is not the same array
    assert len(m) == 2
    del a
    gc.collect()
    assert len(m) == 0
