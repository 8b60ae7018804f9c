"""PyTorch references for the nn rows (activations, fused softmax/norm/loss/attention, conv,
pooling, embedding), keyed by row name.

Each reference takes the row's inputs as torch tensors (int64 for index inputs) and its attrs as
keywords, and returns what the row returns: per-row losses before reduction, and the output of
the kernel with the row's own conventions (a 0-d attention bias or keep mask means none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Ref = Callable[..., torch.Tensor]


def _layer_norm(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, normalized_ndim: int, eps: float
) -> torch.Tensor:
    return F.layer_norm(x, tuple(x.shape[x.ndim - normalized_ndim :]), w, b, eps)


def _rms_norm(x: torch.Tensor, w: torch.Tensor, normalized_ndim: int, eps: float) -> torch.Tensor:
    return F.rms_norm(x, tuple(x.shape[x.ndim - normalized_ndim :]), w, eps)


def _batch_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    return F.batch_norm(x, None, None, w, b, training=True, eps=eps)


def _cross_entropy(
    x: torch.Tensor, t: torch.Tensor, ignore_index: int, label_smoothing: float
) -> torch.Tensor:
    # the row returns each row's loss (its logsumexp is a residual, not an output)
    return F.cross_entropy(
        x, t, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none"
    )


def _linear_cross_entropy(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor,
    t: torch.Tensor,
    ignore_index: int,
    label_smoothing: float,
    chunk: int,
) -> torch.Tensor:
    # the fused row is linear + cross_entropy per row (0-d bias: none); chunk changes no value
    logits = F.linear(x, w, b if b.ndim else None)
    return _cross_entropy(logits, t, ignore_index, label_smoothing)


def _cross_entropy_soft(x: torch.Tensor, p: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    return F.cross_entropy(x, p, label_smoothing=label_smoothing, reduction="none")


def _bce_with_logits(x: torch.Tensor, t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # F.binary_cross_entropy_with_logits(x, t, pos_weight=w, reduction="none") written out,
    # because PyTorch gives pos_weight no gradient and the row does
    return w * t * F.softplus(-x) + (1 - t) * F.softplus(x)


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor,
    keep: torch.Tensor,
    scale: float,
    is_causal: bool,
) -> torch.Tensor:
    # written out (PyTorch's SDPA draws its own dropout mask; this row takes a kept one)
    s = q @ k.transpose(-2, -1) * scale
    if bias.ndim:
        s = s + bias
    if is_causal:
        L, S = s.shape[-2:]
        causal = torch.ones(L, S, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
    p = torch.softmax(s, dim=-1)
    if keep.ndim:
        p = p * keep
    return p @ v


def _conv2d(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> torch.Tensor:
    return F.conv2d(x, w, b, stride, padding, dilation, groups)


def _conv_transpose2d(
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
) -> torch.Tensor:
    return F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)


REFS: dict[str, Ref] = {
    "relu": F.relu,
    "gelu": lambda x, approximate: F.gelu(x, approximate=approximate),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "softmax": lambda x, dim: torch.softmax(x, dim),
    "log_softmax": lambda x, dim: torch.log_softmax(x, dim),
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "batch_norm": _batch_norm,
    "cross_entropy": _cross_entropy,
    "cross_entropy_soft": _cross_entropy_soft,
    "linear_cross_entropy": _linear_cross_entropy,
    "nll_loss": lambda x, t, ignore_index: F.nll_loss(
        x, t, ignore_index=ignore_index, reduction="none"
    ),
    "binary_cross_entropy": lambda p, t: F.binary_cross_entropy(p, t, reduction="none"),
    "binary_cross_entropy_with_logits": _bce_with_logits,
    "attention": _attention,
    "embedding": lambda idx, w: F.embedding(idx, w),
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "max_pool2d": lambda x, kernel_size, stride, padding, dilation, ceil_mode=False: F.max_pool2d(
        x, kernel_size, stride, padding, dilation, ceil_mode
    ),
    "max_pool2d_indices": lambda x, kernel_size, stride, padding, dilation, ceil_mode=False: (
        F.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)[1]
    ),
    "avg_pool2d": lambda x, kernel_size, stride, padding, **kw: F.avg_pool2d(
        x, kernel_size, stride, padding, **kw
    ),
    "max_unpool2d": lambda x, indices, output_size: torch.ops.aten.max_unpool2d(
        x, indices, list(output_size)
    ),
    "adaptive_avg_pool2d": lambda x, output_size: F.adaptive_avg_pool2d(x, output_size),
}
