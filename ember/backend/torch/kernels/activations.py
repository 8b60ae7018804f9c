"""Torch kernels of the activation rows (relu, sigmoid, softplus, gelu, silu)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .stats import Tensor, aten

# one-call rows are the torch functions themselves: no Python frame per call
relu = torch.relu


def relu_backward(grad: Tensor, out: Tensor) -> Tensor:
    return aten.threshold_backward(grad, out, 0)


sigmoid = torch.sigmoid


def softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)), stable for large |x| (no threshold switch, unlike F.softplus)."""
    return torch.log1p(torch.exp(-torch.abs(x))) + torch.clamp_min(x, 0)


def gelu(x: Tensor, approximate: str) -> Tensor:
    return F.gelu(x, approximate=approximate)


def gelu_backward(grad: Tensor, x: Tensor, approximate: str) -> Tensor:
    return aten.gelu_backward(grad, x, approximate=approximate)


silu = F.silu


def silu_backward(grad: Tensor, x: Tensor) -> Tensor:
    return aten.silu_backward(grad, x)
