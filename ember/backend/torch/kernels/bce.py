"""Torch kernels of binary cross-entropy, on probabilities and on logits."""

from __future__ import annotations

import torch

from .activations import softplus
from .stats import Tensor


def bce(p: Tensor, t: Tensor) -> Tensor:
    """-(t log p + (1 - t) log(1 - p)), each log clamped at -100 (any real target, as NumPy)."""
    lp = torch.clamp_min(torch.log(p), -100)
    l1p = torch.clamp_min(torch.log1p(-p), -100)
    return -(t * lp + (1 - t) * l1p)


def bce_backward(grad: Tensor, p: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
    # d/dp = (p - t) / (p (1 - p)), the denominator kept >= 1e-12;  d/dt = log(1 - p) - log(p)
    gp = grad * (p - t) / torch.clamp_min(p * (1 - p), 1e-12)
    gt = grad * (torch.clamp_min(torch.log1p(-p), -100) - torch.clamp_min(torch.log(p), -100))
    return gp, gt


def bce_with_logits(x: Tensor, t: Tensor, pos_weight: Tensor) -> Tensor:
    """-(w t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))) with w = pos_weight, stably."""
    return pos_weight * t * softplus(-x) + (1 - t) * softplus(x)
