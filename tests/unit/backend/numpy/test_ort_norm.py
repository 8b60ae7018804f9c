"""Layer norm's float32 forward on ONNX Runtime (``kernels/ort_norm.py``) and the statistics it
keeps for the backward (``norm._row_kept``): accuracy on rows far from zero, the backward's bits
with the statistics kept or computed again, entries going with their arrays, the thread rule,
and the opt-out."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import norm, ort_norm
from ember.backend.numpy.kernels.threads import _serial

pytest.importorskip("onnxruntime")

U = 2.0**-24  # float32's unit roundoff


@pytest.fixture(autouse=True)
def _route_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_CONV", raising=False)


def _operands(rows: int, width: int, loc: float, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = (loc + rng.standard_normal((rows, width))).astype(np.float32)
    g, w, b = (rng.standard_normal(s, dtype=np.float32) for s in ((rows, width), width, width))
    return x, g, w, b


@pytest.mark.parametrize("loc", [0.0, 1e3, 1e5])
@pytest.mark.parametrize("shape", [(1024, 128), (5, 3), (4096, 96), (2, 2049)])
def test_forward_against_float64(shape: tuple[int, int], loc: float) -> None:
    """Within float32 rounding of the inputs' magnitude: the mean rounded to float32 (u |mean|),
    the subtraction and the scaling (a few u of |x - mean|), each carried by rstd, w and b."""
    x, _, w, b = _operands(*shape, loc, seed=shape[0] + int(loc))
    got = ort_norm.layer_norm(x, w, b, 1e-5)
    assert got is not None
    y, mean, rstd = got
    x64 = x.astype(np.float64)
    mean64 = x64.mean(axis=1, keepdims=True)
    xc = x64 - mean64
    rstd64 = 1 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + 1e-5)
    want = xc * rstd64 * w + b
    bound = 8 * U * ((np.abs(mean64) + np.abs(xc)) * rstd64 * np.abs(w) + np.abs(b))
    assert float((np.abs(y - want) - bound).max()) <= 0
    np.testing.assert_allclose(mean, mean64, rtol=4 * U, atol=0)
    # the variance of rows centred on a float32 mean: off by about u |mean| / std relatively
    rstd_bound = 8 * U * (1 + np.abs(mean64) * rstd64) * rstd64
    assert float((np.abs(rstd - rstd64) - rstd_bound).max()) <= 0


class Spy:
    """Counts the ORT layer-norm runs and records their thread counts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[int] = []
        run_into = ort_norm._run_into

        def spy(build: Any, args: Any, feeds: Any, outputs: Any, threads: int) -> bool:
            self.threads.append(threads)
            return run_into(build, args, feeds, outputs, threads)

        monkeypatch.setattr(ort_norm, "_run_into", spy)


def test_the_backward_reads_the_kept_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    x, g, w, b = _operands(64, 128, 2.0, seed=1)
    spy = Spy(monkeypatch)
    norm.layer_norm(x, w, b, 1, 1e-5)
    kept = norm.layer_norm_backward(g, x, w, b, 1, 1e-5)
    assert len(spy.threads) == 1  # the backward ran no second ORT pass
    # a copy of x (as a recomputed checkpoint is) finds nothing kept: the same kernel's
    # statistics are computed again, so the bits are the same
    again = norm.layer_norm_backward(g, x.copy(), w, b, 1, 1e-5)
    assert len(spy.threads) == 2
    assert not isinstance(kept, type(NotImplemented))
    assert not isinstance(again, type(NotImplemented))
    for a, c in zip(kept, again):
        np.testing.assert_array_equal(a, c)
    # another epsilon is another call: nothing kept for it
    norm.layer_norm_backward(g, x, w, b, 1, 1e-3)
    assert len(spy.threads) == 3


def test_entries_go_with_their_arrays() -> None:
    x, _, w, b = _operands(8, 16, 0.0, seed=2)
    before = len(norm._row_kept)
    norm.layer_norm(x, w, b, 1, 1e-5)
    assert len(norm._row_kept) == before + 1
    del x
    gc.collect()
    assert len(norm._row_kept) == before


def test_thread_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    spy = Spy(monkeypatch)
    small, _, w, b = _operands(1024, 128, 0.0, seed=3)  # 131 K elements: one ORT thread
    large = np.tile(small, (4, 1))  # 524 K: ORT's threads
    ort_norm.layer_norm(small, w, b, 1e-5)
    ort_norm.layer_norm(large, w, b, 1e-5)
    monkeypatch.setattr(_serial, "on", True, raising=False)  # inside a pool share
    ort_norm.layer_norm(large, w, b, 1e-5)
    assert spy.threads == [1, 2, 1]


def test_the_opt_out_runs_numpys_form(monkeypatch: pytest.MonkeyPatch) -> None:
    x, g, w, b = _operands(32, 48, 1.0, seed=4)
    on = norm.layer_norm(x, w, b, 1, 1e-5), norm.layer_norm_backward(g, x, w, b, 1, 1e-5)
    monkeypatch.setenv("EMBER_CONV", "numpy")
    assert ort_norm.layer_norm(x, w, b, 1e-5) is None
    x2 = x.copy()
    off = norm.layer_norm(x2, w, b, 1, 1e-5), norm.layer_norm_backward(g, x2, w, b, 1, 1e-5)
    assert not isinstance(on[1], type(NotImplemented))
    assert not isinstance(off[1], type(NotImplemented))
    for a, c in zip((on[0], *on[1]), (off[0], *off[1])):  # two float32 roundings apart
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5 * float(np.abs(c).max()))
