"""erf for NumPy arrays: SciPy's when it is installed, else a double-precision fallback."""

from __future__ import annotations

import numpy as np

try:  # SciPy's erf is exact and fast; it is optional
    from scipy.special import erf as _scipy_erf
except ImportError:  # pragma: no cover - exercised when SciPy is absent
    _scipy_erf = None

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


def erf_fallback(x: np.ndarray) -> np.ndarray:
    """erf(x) to about 1e-15, from a positive-term series (|x| < 2.5) and a continued fraction."""
    z = np.asarray(x, dtype=np.float64)
    a = np.abs(z)
    out = np.empty_like(a)
    small = a < 2.5
    s = a[small]
    # erf(s) = 2/sqrt(pi) * exp(-s^2) * sum_n (2 s^2)^n s / (1*3*...*(2n+1)); every term positive
    term = s.copy()
    total = s.copy()
    two_s2 = 2.0 * s * s
    for n in range(1, 80):
        term = term * two_s2 / (2 * n + 1)
        total += term
    out[small] = _TWO_OVER_SQRT_PI * np.exp(-s * s) * total
    b = a[~small]
    # erfc(b) = exp(-b^2)/sqrt(pi) / (b + (1/2)/(b + 1/(b + (3/2)/(b + ...)))), evaluated backwards
    frac = np.zeros_like(b)
    for k in range(60, 0, -1):
        frac = (k / 2.0) / (b + frac)
    out[~small] = 1.0 - np.exp(-b * b) / np.sqrt(np.pi) / (b + frac)
    return np.copysign(out, z).astype(x.dtype, copy=False)


def erf(x: np.ndarray) -> np.ndarray:
    if _scipy_erf is not None and x.dtype in (np.float32, np.float64):
        return np.asarray(_scipy_erf(x))
    if _scipy_erf is not None:
        return np.asarray(_scipy_erf(x.astype(np.float32))).astype(x.dtype)
    return erf_fallback(x)
