"""Comparison tolerances that follow from the dtype and the op, not from a hard-coded number.

Two computations of one result (two backends, a fused kernel and the math path, a kernel and a
float64 reference) each round about ``chain`` times on the way to an output element: a
reduction of ``n`` terms counts ``n``, an elementwise op counts 1, and an op that amplifies the
error of its input (``exp`` of a logit of size ``s`` multiplies it by ``s``) counts that factor.
Each rounding errs by at most half an ulp, ``eps / 2``, so the two results differ by at most
about ``chain * eps`` relative to the size of the terms summed:

* ``rtol = chain * eps``;
* ``atol = rtol * scale``, where ``scale`` is the size of those terms (for values of order one,
  1): an element whose terms cancel to near zero keeps their absolute error, which a relative
  tolerance alone would call a mismatch.

So float64 short chains land near 1e-14 to 1e-12, float32 near 1e-6 to 1e-5, bfloat16 near
1e-2: what each format can promise, no tighter (a flaky test) and no looser (a blind one).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

# machine epsilon (the gap between 1 and the next number) of each float format
_EPS = {
    "float64": float(np.finfo(np.float64).eps),
    "float32": float(np.finfo(np.float32).eps),
    "float16": float(np.finfo(np.float16).eps),
    "bfloat16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps),
}


def eps(dtype: Any) -> float:
    """Machine epsilon of ``dtype``: a NumPy, torch or ember float dtype, or its name."""
    name = _name(dtype)
    if name not in _EPS:
        raise TypeError(f"eps: expected a float dtype ({', '.join(_EPS)}), got {dtype!r}.")
    return _EPS[name]


def tolerance(dtype: Any, chain: float, scale: float = 1.0) -> dict[str, float]:
    """``{"rtol", "atol"}`` for two results of ``dtype`` that each round about ``chain`` times
    per element, on terms of size ``scale``; pass it on: ``assert_allclose(a, b, **tol)``."""
    if chain < 1 or scale <= 0:
        raise ValueError(f"tolerance: expected chain >= 1 and scale > 0, got {chain}, {scale}.")
    rtol = chain * eps(dtype)
    return {"rtol": rtol, "atol": rtol * scale}


def _name(dtype: Any) -> str:
    """``"float32"`` for np.float32, np.dtype("float32"), torch.float32, em.float32 or "float32"."""
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, (type, np.dtype)):
        return np.dtype(dtype).name
    return str(dtype).rpartition(".")[2]  # "torch.bfloat16", "ember.bfloat16"


def attention_tolerance(
    dtype: Any, keys: int, head_dim: int, backward: bool = False
) -> dict[str, float]:
    """Tolerance of scaled dot-product attention over ``keys`` keys of size ``head_dim``, on
    inputs of order one.

    Forward: the score sums ``head_dim`` products and the output sums ``keys`` weighted values;
    each counts twice, as the exp and the softmax normalisation carry the score's error on to
    the weights. Backward: the forward's chain again (the softmax is rebuilt, then the gradient
    runs through the same sums), on terms of size ``sqrt(head_dim)`` (``dO @ V.T`` sums
    ``head_dim`` products of order one).
    """
    chain = 2.0 * (head_dim + keys)
    if not backward:
        return tolerance(dtype, chain)
    return tolerance(dtype, 2.0 * chain, scale=float(np.sqrt(head_dim)))


def assert_channel_sums(got: Any, g: np.ndarray) -> None:
    """``got`` is the per-channel sum of ``g`` (N, C, H, W), in g's dtype, within a float sum's
    error bound of the float64 sum: (N * H * W) eps * sum |g| per channel (the order of the
    additions is the kernel's own)."""
    assert got is not None and got.dtype == g.dtype
    g64 = g.astype(np.float64)
    terms = g.shape[0] * g.shape[2] * g.shape[3]
    bound = terms * eps(g.dtype) * np.abs(g64).sum(axis=(0, 2, 3))
    assert np.all(np.abs(got - g64.sum(axis=(0, 2, 3))) <= bound)
