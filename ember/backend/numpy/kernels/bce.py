"""NumPy kernels of binary cross-entropy, on probabilities and on logits."""

from __future__ import annotations

import numpy as np

from .activations import softplus


def bce(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """-(t log p + (1 - t) log(1 - p)) with each log clamped at -100, as PyTorch does."""
    with np.errstate(divide="ignore"):
        lp = np.maximum(np.log(p), -100)
        l1p = np.maximum(np.log1p(-p), -100)
    return -(t * lp + (1 - t) * l1p)


def bce_backward(grad: np.ndarray, p: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # d/dp = (p - t) / (p (1 - p)), the denominator kept >= 1e-12;  d/dt = log(1 - p) - log(p)
    gp = grad * (p - t) / np.maximum(p * (1 - p), 1e-12)
    with np.errstate(divide="ignore"):
        gt = grad * (np.maximum(np.log1p(-p), -100) - np.maximum(np.log(p), -100))
    return gp.astype(p.dtype, copy=False), gt.astype(p.dtype, copy=False)


def bce_with_logits(x: np.ndarray, t: np.ndarray, pos_weight: np.ndarray) -> np.ndarray:
    """-(w t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))) with w = pos_weight, stably."""
    # log sigmoid(x) = -softplus(-x), log(1 - sigmoid(x)) = -softplus(x)
    return pos_weight * t * softplus(-x) + (1 - t) * softplus(x)
