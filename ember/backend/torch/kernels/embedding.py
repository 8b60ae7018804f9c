"""Torch kernels of the embedding lookup and its gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .stats import Tensor, aten


def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (N, D) at ``indices`` (...): (..., D)."""
    return F.embedding(indices, weight)


def embedding_backward(grad: Tensor, indices: Tensor, num_embeddings: int) -> Tensor:
    """Sum the rows of ``grad`` (..., D) into a (num_embeddings, D) table at ``indices``."""
    if grad.is_cuda:
        # ATen's CUDA embedding backward counts its segments on the host (a sync), and
        # index_add_'s atomics sum a repeated row in a different order on each call (1-ulp
        # differences run to run, so across checkpointing strategies too); an accumulating
        # index_put_ sorts the indices on the device and sums each row in order: reproducible,
        # asynchronous, capturable, as fast (0.159 vs 0.158 ms for 16384 rows of 1024 on an H200)
        d = grad.shape[-1]
        out = torch.zeros((num_embeddings, d), dtype=grad.dtype, device=grad.device)
        return out.index_put_((indices.reshape(-1),), grad.reshape(-1, d), accumulate=True)
    return aten.embedding_dense_backward(grad, indices, num_embeddings, -1, False)
