"""The float32 exact-GELU kernels (polynomial erfc) against a float64 reference, on a dense grid."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.gelu_reference import cdf, grid

from ember.backend.numpy.kernels import gelu_float32 as g32


def test_gelu_block_relative_and_absolute_error() -> None:
    x = grid().astype(np.float32)
    out = np.empty_like(x)
    g32.gelu_block(x, out)
    x64 = x.astype(np.float64)
    ref = x64 * cdf(x64)
    err = np.abs(out - ref)
    assert err.max() <= 6e-7  # absolute, everywhere
    core = (np.abs(x64) <= 3) & (ref != 0)
    assert (err[core] / np.abs(ref[core])).max() <= 1e-6
    tail = (np.abs(ref) > 1e-30) & ~core
    assert (err[tail] / np.abs(ref[tail])).max() <= 1e-5


def test_gelu_backward_block_error() -> None:
    x = grid().astype(np.float32)
    g = np.random.default_rng(4).normal(size=x.shape).astype(np.float32)
    out = np.empty_like(x)
    g32.gelu_backward_block(x, g, out)
    x64 = x.astype(np.float64)
    cdf_x, xpdf = cdf(x64), x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2.0 * math.pi)
    ref = g.astype(np.float64) * (cdf_x + xpdf)
    # relative to |g| (Phi + |x phi|): the two terms cancel where d crosses zero (x ~ -0.75)
    scale = np.abs(g) * (cdf_x + np.abs(xpdf))
    rel = np.abs(out - ref) / np.maximum(scale, 1e-30)
    core = np.abs(x64) <= 3
    assert rel[core].max() <= 1e-6
    assert rel[~core].max() <= 1e-5  # the float32 rounding of x^2 / 2 in the exponent


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_non_finite_and_signed_zero(which: str) -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 50.0, -50.0], dtype=np.float32)
    out = np.empty_like(x)
    if which == "forward":
        g32.gelu_block(x, out)
        assert np.isnan(out[0]) and out[1] == np.inf and np.isnan(out[2])
        assert out[3] == 0 and not np.signbit(out[3]) and np.signbit(out[4])
        assert out[5] == 50.0 and out[6] == 0
    else:
        g32.gelu_backward_block(x, np.ones_like(x), out)
        assert np.isnan(out[0])
        assert out[3] == 0.5 and out[4] == 0.5 and out[5] == 1.0 and out[6] == 0
