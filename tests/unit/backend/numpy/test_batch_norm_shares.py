"""The NumPy batch-norm kernels worked in channel shares on the pool, and ``batch_stats`` and the
backward reusing the statistics of the ``batch_norm`` call on the same array."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from ember.backend.numpy.kernels import norm, threads


def _reference(
    x: np.ndarray, g: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float
) -> tuple[np.ndarray, ...]:
    """float64 forward and gradients of training-mode batch norm over dim 1."""
    x, g, w, b = (a.astype(np.float64) for a in (x, g, w, b))
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    n = x.size // x.shape[1]
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    r = 1 / np.sqrt((xc**2).mean(axis=axes, keepdims=True) + eps)
    y = xc * r * w.reshape(shape) + b.reshape(shape)
    sg, sgx = g.sum(axis=axes, keepdims=True), (g * xc).sum(axis=axes, keepdims=True)
    gx = w.reshape(shape) * r * (g - sg / n - xc * r**2 * sgx / n)
    return y, gx, (r * sgx).ravel(), sg.ravel()


@pytest.mark.parametrize("threads_", ["1", "2", "3"])
@pytest.mark.parametrize(
    "shape", [(64, 16, 32, 32), (32, 16, 32, 32), (8, 5, 7, 3), (4, 64, 2, 2), (16, 7), (3, 33, 40)]
)
def test_shares_match_float64(
    monkeypatch: pytest.MonkeyPatch, threads_: str, shape: tuple[int, ...]
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads_)
    rng = np.random.default_rng(7)
    x = rng.normal(loc=1.5, scale=2.0, size=shape).astype(np.float32)
    g = rng.normal(size=shape).astype(np.float32)
    w = rng.normal(size=shape[1]).astype(np.float32)
    b = rng.normal(size=shape[1]).astype(np.float32)
    y = norm.batch_norm(x, w, b, 1e-5)
    back = norm.batch_norm_backward(g, x, w, b, 1e-5)
    assert not isinstance(back, type(NotImplemented))
    want = _reference(x, g, w, b, 1e-5)
    # float32 sums of n = N*H*W values: a relative error of about sqrt(n) ulps on the statistics,
    # carried into every output through r; compared with the scale of each output
    n = x.size // x.shape[1]
    tol = 8 * np.sqrt(n) * np.finfo(np.float32).eps
    for got, ref in zip((y, *back), want):
        assert got.shape == ref.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.abs(ref).max())


def test_shares_are_the_same_work_at_any_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A channel's arithmetic does not depend on its share: bit-identical at 1 and 2 threads."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 12, 40, 40)).astype(np.float32)  # above the split threshold
    g = rng.normal(size=x.shape).astype(np.float32)
    w, b = np.ones(12, np.float32), np.zeros(12, np.float32)
    out = []
    for t in ("1", "2"):
        monkeypatch.setenv("EMBER_NUM_THREADS", t)
        out.append((norm.batch_norm(x, w, b, 1e-5), *norm.batch_norm_backward(g, x, w, b, 1e-5)))
    for a, c in zip(*out):
        np.testing.assert_array_equal(a, c)


def test_the_pool_takes_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    seen: list[tuple[int, int]] = []
    split = threads._parallel_split

    def spy(n: int, elems: int, fn, blas: bool = True) -> None:  # type: ignore[no-untyped-def]
        def record(lo: int, hi: int) -> None:
            seen.append((lo, hi))
            fn(lo, hi)

        split(n, elems, record, blas)

    monkeypatch.setattr(norm, "_parallel_split", spy)
    x = np.random.default_rng(0).normal(size=(64, 16, 32, 32)).astype(np.float32)
    norm.batch_norm(x, np.ones(16, np.float32), np.zeros(16, np.float32), 1e-5)
    assert sorted(seen) == [(0, 8), (8, 16)]
    seen.clear()
    small = x[:8, :, :16, :16].copy()  # below the threshold: one share, no hand-off
    norm.batch_norm(small, np.ones(16, np.float32), np.zeros(16, np.float32), 1e-5)
    assert not seen


def test_batch_stats_reuses_the_forward_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(loc=4.0, size=(8, 6, 9, 9)).astype(np.float32)
    fresh = norm.batch_stats(x.copy(), 1)  # computed: no batch_norm of that array
    norm.batch_norm(x, np.ones(6, np.float32), np.zeros(6, np.float32), 1e-5)
    calls = []
    monkeypatch.setattr(norm, "_centred", lambda *a, **k: calls.append(1))
    reused = norm.batch_stats(x, 1)
    assert not calls  # nothing recomputed
    for r, f in zip(reused, fresh):
        np.testing.assert_array_equal(r, f)  # the same sums: identical
    other = x + np.float32(1)  # a different array is not served from the cache
    monkeypatch.undo()
    np.testing.assert_allclose(norm.batch_stats(other, 1)[0], fresh[0] + 1, rtol=1e-6)


@pytest.mark.parametrize("threads_", ["1", "2"])
@pytest.mark.parametrize("shape", [(64, 12, 40, 40), (8, 6, 9, 9), (16, 7)])
def test_backward_reuses_the_forward_statistics(
    monkeypatch: pytest.MonkeyPatch, threads_: str, shape: tuple[int, ...]
) -> None:
    """After ``batch_norm`` of x the backward reads its mean and sum of squares instead of summing
    x again (the first shape is above the split threshold): the same bits as summing again."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads_)
    rng = np.random.default_rng(13)
    x = rng.normal(loc=-2.0, scale=3.0, size=shape).astype(np.float32)
    g = rng.normal(size=shape).astype(np.float32)
    w = rng.normal(size=shape[1]).astype(np.float32)
    b = rng.normal(size=shape[1]).astype(np.float32)
    fresh = norm.batch_norm_backward(g, x.copy(), w, b, 1e-5)  # no forward of that copy
    norm.batch_norm(x, w, b, 1e-5)
    sums = []
    real_dot, real_sum = norm._channel_dot, norm._channel_sum
    monkeypatch.setattr(norm, "_channel_dot", lambda *a: sums.append(a[0] is a[1]) or real_dot(*a))
    monkeypatch.setattr(
        norm, "_channel_sum", lambda a, n: sums.append(a.base is x) or real_sum(a, n)
    )
    reused = norm.batch_norm_backward(g, x, w, b, 1e-5)
    assert not isinstance(fresh, type(NotImplemented))
    assert not isinstance(reused, type(NotImplemented))
    assert sums and not any(sums)  # sum(g), sum(g * xc): the backward's own; none of x, xc * xc
    for r, f in zip(reused, fresh):
        np.testing.assert_array_equal(r, f)


def test_statistics_go_with_their_array() -> None:
    x = np.random.default_rng(17).normal(size=(4, 3, 5, 5)).astype(np.float32)
    norm.batch_norm(x, np.ones(3, np.float32), np.zeros(3, np.float32), 1e-5)
    gc.collect()  # entries of arrays that earlier tests dropped go first
    held = len(norm._stats)
    assert norm._recalled(x) is not None
    del x
    gc.collect()
    assert len(norm._stats) == held - 1  # no statistics kept for an array that is gone


def test_non_finite_statistics_take_pytorchs_formula() -> None:
    x = np.random.default_rng(2).normal(size=(4, 3, 5, 5)).astype(np.float32)
    x[1, 2, 3, 3] = np.inf
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    with np.errstate(invalid="ignore"):  # as the backend calls its kernels
        y = norm.batch_norm(x, w, b, 1e-5)
        back = norm.batch_norm_backward(np.ones_like(x), x, w, b, 1e-5)
    assert np.isfinite(y[:, :2]).all() and np.isnan(y[:, 2]).all()
    assert back is NotImplemented  # the row's generic rule places NaN and inf as PyTorch


@pytest.mark.parametrize("length", [1, 16, 21, 64, 300])
def test_a_channels_sums_do_not_depend_on_its_share(length: int) -> None:
    """Each path of the per-channel sums (the N rows added for short rows, dot products with
    ones for long ones) gives a channel the same bits alone, in a share or in the whole."""
    rng = np.random.default_rng(11)
    x2 = rng.normal(loc=3.0, size=(32, 7 * length)).astype(np.float32)
    y2 = rng.normal(size=x2.shape).astype(np.float32)
    whole_sum, whole_dot = norm._channel_sum(x2, length), norm._channel_dot(x2, y2, length)
    for lo, hi in ((0, 1), (1, 5), (5, 7), (2, 3)):
        cols = slice(lo * length, hi * length)
        np.testing.assert_array_equal(norm._channel_sum(x2[:, cols], length), whole_sum[lo:hi])
        np.testing.assert_array_equal(
            norm._channel_dot(x2[:, cols], y2[:, cols], length), whole_dot[lo:hi]
        )
