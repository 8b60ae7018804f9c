"""erf and exact GELU of the NumPy backend against math.erf, float32 and float64."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember.backend.numpy import special
from ember.backend.numpy.kernels import activations as act
from ember.backend.numpy.kernels.threads import _BLOCK_ELEMS

_erf = np.vectorize(math.erf, otypes=[np.float64])
# float32: a few ulps of the result (erf near 0 is ~x, so relative); float64: ~1e-15
_TOL = {np.float32: (4e-7, 1e-37), np.float64: (4e-15, 1e-300)}


def _points(rng: np.random.Generator, n: int) -> np.ndarray:
    """Normal draws, wide draws, and the edges: 0, -0, tiny, the switch at 2.5, large."""
    edges = [0.0, -0.0, 1e-30, -1e-30, 2.5, -2.5, 2.4999, 6.0, -6.0, 30.0, -30.0]
    return np.concatenate([rng.normal(size=n), rng.normal(size=n) * 4, edges])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", ["scipy", "fallback"])
def test_erf_matches_math_erf(dtype: type, which: str) -> None:
    rng = np.random.default_rng(0)
    x = _points(rng, 2000).astype(dtype)
    if which == "scipy":
        if special._scipy_erf is None:
            pytest.skip("SciPy is not installed")
        got = special.erf(x)
    else:
        got = special.erf_fallback(x)
    assert got.dtype == dtype and got.shape == x.shape
    rtol, atol = _TOL[dtype]
    np.testing.assert_allclose(got, _erf(x.astype(np.float64)), rtol=rtol, atol=atol)
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


def test_erf_out_argument_writes_in_place() -> None:
    if special._scipy_erf is None:
        pytest.skip("SciPy is not installed")
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    want = _erf(x.astype(np.float64))
    got = special.erf(x, out=x)
    assert got is x or np.shares_memory(got, x)
    np.testing.assert_allclose(x, want, rtol=4e-7, atol=1e-37)


def _gelu_ref(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2)))


def _gelu_grad_ref(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    cdf = 0.5 * (1 + _erf(x64 / math.sqrt(2)))
    return g.astype(np.float64) * (cdf + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize(
    "shape",
    [(), (5,), (3, 7), (2 * _BLOCK_ELEMS + 13,), (2, _BLOCK_ELEMS // 2 + 3, 3)],
    ids=["0d", "small", "2d", "three_blocks", "odd_3d"],
)
def test_exact_gelu_blocked_kernels(
    dtype: type, threads: str, shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    rng = np.random.default_rng(1)
    x = (rng.normal(size=shape) * 3).astype(dtype)
    g = rng.normal(size=shape).astype(dtype)
    # float32: the few roundings of the in-place passes, relative to max(|y|, 1e-6)
    tol = 2e-6 if dtype == np.float32 else 1e-14
    y = act.gelu(x, "none")
    assert isinstance(y, np.ndarray) and y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, _gelu_ref(x), rtol=tol, atol=tol)
    gx = act.gelu_backward(g, x, "none")
    assert isinstance(gx, np.ndarray) and gx.dtype == dtype and gx.shape == x.shape
    np.testing.assert_allclose(gx, _gelu_grad_ref(g, x), rtol=tol, atol=tol)


def test_exact_gelu_non_contiguous_input() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 30)).astype(np.float32).T  # F-ordered view
    g = rng.normal(size=(30, 40)).astype(np.float32)
    before = x.copy()
    np.testing.assert_allclose(act.gelu(x, "none"), _gelu_ref(x), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(
        act.gelu_backward(g, x, "none"), _gelu_grad_ref(g, x), rtol=2e-6, atol=2e-6
    )
    assert np.array_equal(x, before)  # the input is not written


def test_exact_gelu_non_finite_as_pytorch() -> None:
    # PyTorch: gelu(nan) = nan, gelu(inf) = inf, gelu(-inf) = nan (-inf * 0)
    x = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    with np.errstate(invalid="ignore"):
        y = act.gelu(x, "none")
    assert np.isnan(y[0]) and y[1] == np.inf and np.isnan(y[2]) and np.isfinite(y[3])
