"""The kernel pool's shares run in the caller's NumPy error state (``threads._submit``): a
model fed an inf under ``np.errstate(invalid="ignore")`` stays quiet on every thread, and one
that asked to raise gets FloatingPointError from a share on any thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv
from ember.backend.numpy.kernels.threads import _parallel_rows, _parallel_split


def _zero_by_zero(lo: int, hi: int, seen: set[int]) -> None:
    seen.add(threading.get_ident())
    np.divide(np.zeros(hi - lo), np.zeros(hi - lo))


@pytest.mark.parametrize("split", ["split", "rows"])
def test_shares_keep_the_callers_errstate(split: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    seen: set[int] = set()

    def run() -> None:
        if split == "split":
            _parallel_split(4, 1 << 20, lambda lo, hi: _zero_by_zero(lo, hi, seen))
        else:
            _parallel_rows(4, 1 << 18, lambda lo, hi: _zero_by_zero(lo, hi, seen))

    with np.errstate(invalid="ignore"):
        run()  # the suite turns warnings into errors: a warning on a pool thread would raise
    assert len(seen) == 2  # the work did reach a pool thread
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        run()


def test_conv_gradients_of_infs_are_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """ember's chunked convolution gradients split over the pool: infs in x and the output
    gradient under errstate 'ignore' give no warning from any share (inf - inf meets in the
    weight gradient), and the NaN / inf places of one thread."""
    monkeypatch.setenv("EMBER_CONV", "numpy")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 16, 8, 8), dtype=np.float32)
    w = rng.standard_normal((32, 16, 3, 3), dtype=np.float32)
    g = rng.standard_normal((16, 32, 8, 8), dtype=np.float32)
    x[2, 3, 0, 7] = x[5, 1, 4, 4] = np.inf
    g[1, 2, -1, 0] = g[0, 7, 2, 2] = np.inf

    def run(threads: str) -> list[np.ndarray]:
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        with np.errstate(invalid="ignore", over="ignore"):
            gx, gw, _ = conv.conv2d_backward(g, x, w, (1, 1), (1, 1), (1, 1), 1, True, True)
        assert gx is not None and gw is not None
        return [gx, gw]

    got, want = run("2"), run("1")
    assert np.isnan(got[1]).any()
    for a, e in zip(got, want, strict=True):
        for mask in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(mask(a), mask(e))
