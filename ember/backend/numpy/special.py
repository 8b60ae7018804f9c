"""erf for NumPy arrays: SciPy's (a dependency of ember), else a double-precision fallback."""

from __future__ import annotations

import numpy as np

try:  # SciPy's erf is exact and fast; the fallback serves an install without it
    from scipy.special import erf as _scipy_erf
except ImportError:  # pragma: no cover - exercised when SciPy is absent
    _scipy_erf = None

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


_CHUNK = 1 << 15  # elements per pass: bounds the temporaries of the fallback


def _erf_block(z: np.ndarray) -> np.ndarray:
    """erf of a float64 block, to about 1e-15."""
    a = np.abs(z)
    out = np.empty_like(a)
    small = a < 2.5
    s = a[small]
    if s.size:
        # erf(s) = 2/sqrt(pi) exp(-s^2) sum_n (2 s^2)^n s / (1*3*...*(2n+1)); every term positive
        term = s.copy()
        total = s.copy()
        two_s2 = 2.0 * s * s
        for n in range(1, 90):
            term *= two_s2
            term /= 2 * n + 1
            total += term
            if n % 8 == 0 and np.all(term <= 1e-17 * total):
                break
        out[small] = _TWO_OVER_SQRT_PI * np.exp(-s * s) * total
    b = a[~small]
    if b.size:
        # erfc(b) = exp(-b^2)/sqrt(pi) / (b + (1/2)/(b + 1/(b + (3/2)/(b + ...)))), backwards
        frac = np.zeros_like(b)
        for k in range(60, 0, -1):
            frac = (k / 2.0) / (b + frac)
        out[~small] = 1.0 - np.exp(-b * b) / np.sqrt(np.pi) / (b + frac)
    return np.copysign(out, z)


def erf_fallback(x: np.ndarray) -> np.ndarray:
    """erf(x) to about 1e-15 without SciPy, in blocks so temporaries stay small."""
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    for i in range(0, flat.size, _CHUNK):
        out[i : i + _CHUNK] = _erf_block(flat[i : i + _CHUNK])
    return out.reshape(np.shape(x)).astype(x.dtype, copy=False)


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf(x) in x's dtype; ``out`` (float32 or float64 like x, may be x itself) receives it
    when SciPy computes it, and is ignored otherwise (use the returned array)."""
    if _scipy_erf is not None and x.dtype in (np.float32, np.float64):
        if out is not None:
            return np.asarray(_scipy_erf(x, out=out))
        return np.asarray(_scipy_erf(x))
    if _scipy_erf is not None:
        return np.asarray(_scipy_erf(x.astype(np.float32))).astype(x.dtype)
    return erf_fallback(x)
