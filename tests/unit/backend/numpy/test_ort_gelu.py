"""The ONNX Runtime route of the float32 exact GELU (``kernels/ort_gelu.py``): error against a
float64 reference on a dense grid, non-finite values as PyTorch, one session for every shape,
the opt-out and a failing session falling back to the polynomial, bit equality run to run."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from helpers.gelu_reference import cdf, grid

from ember.backend.numpy.kernels import activations as act
from ember.backend.numpy.kernels import gelu_float32, ort_conv, ort_gelu

pytest.importorskip("onnxruntime")


@pytest.fixture(autouse=True)
def _route_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_CONV", raising=False)


class Spy:
    """Counts the sessions the route asks for, by graph builder."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.builds: list[Any] = []
        self.session = session = ort_conv._session

        def spy(build: Any, args: tuple[object, ...], threads: int) -> Any:
            self.builds.append(build)
            return session(build, args, threads)

        monkeypatch.setattr(ort_conv, "_session", spy)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_forward_error(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Absolute error below 6e-7 everywhere, and within 2e-6 |y| + u |x|: PyTorch's formula, whose
    1 + erf cancels in the negative tail, so erf's rounding (about u) scaled by x / 2 bounds the
    error there rather than a share of |y|."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    x = grid().astype(np.float32)
    y = ort_gelu.gelu(x)
    assert y is not None and y.dtype == np.float32 and y.shape == x.shape
    x64 = x.astype(np.float64)
    ref = x64 * cdf(x64)
    err = np.abs(y - ref)
    assert err.max() <= 6e-7
    assert np.all(err <= 2e-6 * np.abs(ref) + 2.0**-24 * np.abs(x64))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_backward_error(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against g (Phi + x phi) in float64: within 2e-6 |g| (Phi + |x phi|) + 6e-7 |g| (the
    terms cancel near x = -0.75; the absolute part is erf's, as in the forward)."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    x = grid().astype(np.float32)
    g = np.random.default_rng(4).normal(size=x.shape).astype(np.float32)
    got = ort_gelu.gelu_backward(g, x)
    assert got is not None and got.dtype == np.float32
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    cdf_x, xpdf = cdf(x64), x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2.0 * math.pi)
    ref = g64 * (cdf_x + xpdf)
    bound = 2e-6 * np.abs(g64) * (cdf_x + np.abs(xpdf)) + 6e-7 * np.abs(g64)
    assert np.all(np.abs(got - ref) <= bound)


def test_non_finite_as_the_polynomial_and_pytorch() -> None:
    """Non-finite inputs as the polynomial fallback: gelu(inf) = inf, gelu(-inf) = nan and the
    gradient at +-inf nan (PyTorch 2.13 agrees; torch 2.11's AVX-512 kernel gives gelu(inf) =
    nan). Finite values, the signed zero and an infinite output gradient as PyTorch."""
    torch = pytest.importorskip("torch")
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 50.0, -50.0, 1.0], dtype=np.float32)
    g = np.array([1, 1, 1, 1, 1, 1, 1, np.inf], dtype=np.float32)
    y, d = ort_gelu.gelu(x), ort_gelu.gelu_backward(g, x)
    assert y is not None and d is not None
    with np.errstate(invalid="ignore", over="ignore"):
        want_y, want_d = act._gelu_exact(x), act._gelu_exact_backward(g, x)
    np.testing.assert_array_equal(y, want_y)  # nan at nan and -inf, inf at inf
    np.testing.assert_array_equal(d, want_d)
    assert np.signbit(y[4]) and np.signbit(y[6])  # gelu(-0) = -0; gelu(-50) rounds to -0
    fin = np.isfinite(x)
    tx = torch.from_numpy(x[fin]).requires_grad_()
    ty = torch.nn.functional.gelu(tx)
    (td,) = torch.autograd.grad(ty, tx, torch.from_numpy(g[fin]))
    np.testing.assert_array_equal(y[fin], ty.detach().numpy())
    np.testing.assert_allclose(d[fin], td.numpy(), rtol=2e-6)


def test_one_session_serves_every_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    spy = Spy(monkeypatch)
    rng = np.random.default_rng(5)
    for shape in [(), (3,), (4, 5), (2, 3, 7), (1025,)]:
        x = rng.normal(size=shape).astype(np.float32)
        y = act.gelu(x, "none")
        assert isinstance(y, np.ndarray) and y.shape == shape and y.dtype == np.float32
        d = act.gelu_backward(np.ones_like(x), x, "none")
        assert isinstance(d, np.ndarray) and d.shape == shape
    assert spy.builds.count(ort_gelu._gelu_graph) == 5
    sessions = {spy.session(b, (), 2) for b in spy.builds}
    assert len(sessions) == 2  # the forward's and the backward's, shared by the five shapes


def test_non_contiguous_input_not_written() -> None:
    x = np.random.default_rng(6).normal(size=(40, 30)).astype(np.float32).T
    before = x.copy()
    y = ort_gelu.gelu(x)
    assert y is not None and y.shape == (30, 40)
    np.testing.assert_array_equal(y, ort_gelu.gelu(np.ascontiguousarray(x)))
    np.testing.assert_array_equal(x, before)


def _polynomial(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    gelu_float32.gelu_block(x, out)
    return out


def test_opt_out_and_float64_keep_the_polynomial(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    x = np.random.default_rng(7).normal(size=1000).astype(np.float32)
    act.gelu(x.astype(np.float64), "none")
    act.gelu_backward(np.ones(1000), x.astype(np.float64), "none")
    monkeypatch.setenv("EMBER_CONV", "numpy")
    y = act.gelu(x, "none")
    act.gelu_backward(np.ones_like(x), x, "none")
    assert not spy.builds
    np.testing.assert_array_equal(y, _polynomial(x))


def test_failing_session_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(8).normal(size=1000).astype(np.float32)

    def broken(*args: Any) -> Any:
        raise RuntimeError("no session")

    assert ort_conv._on(x)  # onnxruntime loaded before its sessions break
    ort_conv._session.cache_clear()
    monkeypatch.setattr(ort_conv, "_create", broken)
    try:
        np.testing.assert_array_equal(act.gelu(x, "none"), _polynomial(x))
    finally:
        ort_conv._session.cache_clear()  # no cached None for later tests


@pytest.mark.parametrize("threads", ["1", "2"])
def test_deterministic(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    rng = np.random.default_rng(9)
    x = rng.normal(size=300_000).astype(np.float32)
    g = rng.normal(size=300_000).astype(np.float32)
    first = [ort_gelu.gelu(x), ort_gelu.gelu_backward(g, x)]
    ort_conv._session.cache_clear()
    again = [ort_gelu.gelu(x), ort_gelu.gelu_backward(g, x)]
    for a, b in zip(first, again, strict=True):
        assert a is not None and b is not None
        np.testing.assert_array_equal(a, b)
