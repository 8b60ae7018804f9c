"""Torch kernels of the fused normalisation rows: layer norm, RMS norm and batch norm.

Layer and batch norm's backwards are ATen's fused kernels (the rows' ``fused_backward``); RMS
norm's backward is the row's generic rule.
"""

from __future__ import annotations

import torch

from .stats import Tensor, _recall, _remember, aten


def _layer_stats(x: Tensor, normalized_ndim: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    shape = list(x.shape[x.ndim - normalized_ndim :])
    return torch.native_layer_norm(x, shape, None, None, eps)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, normalized_ndim: int, eps: float) -> Tensor:
    shape = list(x.shape[x.ndim - normalized_ndim :])
    out, mean, rstd = torch.native_layer_norm(x, shape, weight, bias, eps)
    _remember(x, "ln", (normalized_ndim, eps), (mean, rstd))
    return out


def layer_norm_backward(
    grad: Tensor, x: Tensor, weight: Tensor, bias: Tensor, normalized_ndim: int, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """ATen's fused backward, from the statistics the forward remembered (else recomputed)."""
    stats = _recall(x, "ln", (normalized_ndim, eps))
    if stats is None:
        _, mean, rstd = _layer_stats(x, normalized_ndim, eps)
    else:
        mean, rstd = stats
    shape = list(x.shape[x.ndim - normalized_ndim :])
    gx, gw, gb = aten.native_layer_norm_backward(
        grad, x, shape, mean, rstd, weight, bias, [True, True, True]
    )
    return gx, gw, gb


def _rms_scale(x: Tensor, normalized_ndim: int, eps: float) -> Tensor:
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    return torch.rsqrt(torch.mean(x * x, dims, keepdim=True) + eps)


def rms_norm(x: Tensor, weight: Tensor, normalized_ndim: int, eps: float) -> Tensor:
    return x * _rms_scale(x, normalized_ndim, eps) * weight


def batch_stats(x: Tensor, correction: int) -> tuple[Tensor, Tensor]:
    """``(mean, var)`` per channel of x (N, C, *), both (C,), in one ``var_mean`` kernel."""
    var, mean = torch.var_mean(x, dim=(0, *range(2, x.ndim)), correction=correction)
    return mean, var


def batch_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """Normalise with the batch statistics over every dim but 1."""
    out, mean, invstd = aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, eps)
    _remember(x, "bn", (eps,), (mean, invstd))
    return out


def batch_norm_backward(
    grad: Tensor, x: Tensor, weight: Tensor, bias: Tensor, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """ATen's fused backward, from the statistics the forward remembered (else recomputed)."""
    stats = _recall(x, "bn", (eps,))
    if stats is None:
        _, mean, invstd = aten.native_batch_norm(x, weight, None, None, None, True, 0.0, eps)
    else:
        mean, invstd = stats
    gx, gw, gb = aten.native_batch_norm_backward(
        grad, x, weight, None, None, mean, invstd, True, eps, [True, True, True]
    )
    return gx, gw, gb
