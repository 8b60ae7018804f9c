"""Torch kernels of the embedding lookup and its gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .ordered import ordered_index_add_
from .stats import Tensor, aten


def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (N, D) at ``indices`` (...): (..., D)."""
    return F.embedding(indices, weight)


def embedding_backward(grad: Tensor, indices: Tensor, num_embeddings: int) -> Tensor:
    """Sum the rows of ``grad`` (..., D) into a (num_embeddings, D) table at ``indices``."""
    if grad.is_cuda:
        # ATen's CUDA embedding backward counts its segments on the host (a sync), and
        # index_add_ sums a repeated row with atomics; ordered_index_add_ is asynchronous,
        # capturable and as fast (0.159 vs 0.158 ms for 16384 rows of 1024 on an H200)
        d = grad.shape[-1]
        out = torch.zeros((num_embeddings, d), dtype=grad.dtype, device=grad.device)
        return ordered_index_add_(out, 0, indices.reshape(-1), grad.reshape(-1, d))
    return aten.embedding_dense_backward(grad, indices, num_embeddings, -1, False)
