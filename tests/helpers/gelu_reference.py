"""The float64 reference of the float32 GELU kernels' accuracy tests: the inputs and Phi(x)."""

from __future__ import annotations

import math

import numpy as np

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def grid() -> np.ndarray:
    """A dense grid over [-16, 16], seeded normal draws and values around 0 (float64)."""
    rng = np.random.default_rng(3)
    dense = np.linspace(-16.0, 16.0, 64001)
    return np.concatenate([dense, rng.normal(size=4000) * 3, [0.0, 1e-30, -1e-30, 1e-5, -1e-5]])


def cdf(x64: np.ndarray) -> np.ndarray:
    """The standard normal CDF, from math.erfc (exact in the tails, unlike 1 + erf)."""
    return np.asarray(0.5 * _erfc(-x64 / math.sqrt(2.0)))
