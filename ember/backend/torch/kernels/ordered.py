"""Sums at repeated indices in one order on every call (CUDA's ``index_add_`` and
``scatter_add_`` use atomics, whose order, and so whose float rounding, changes from call to
call: 1-ulp differences run to run, hence between checkpointing strategies). An accumulating
``index_put_`` sorts the indices on the device and sums each target in order, without a host
sync and inside a CUDA graph (PyTorch's own deterministic ``index_add_``)."""

from __future__ import annotations

import torch

from .stats import Tensor


def ordered_index_add_(x: Tensor, dim: int, index: Tensor, values: Tensor) -> Tensor:
    """``x.index_add_(dim, index, values)``, in place: ``index`` (N,) picks along ``dim``,
    ``values`` has ``x``'s shape with N along ``dim``."""
    key: list[Tensor | None] = [None] * dim + [index]  # None: every index of a leading dim
    return torch.ops.aten.index_put_(x, key, values, True)


def ordered_scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``x.scatter_add_(dim, index, src)``, in place: ``src[p]`` (for every position ``p`` of
    ``index``) is added at ``p`` with its ``dim`` coordinate replaced by ``index[p]``."""
    n = index.ndim
    key: list[Tensor] = []
    for d in range(n):
        if d == dim:
            key.append(index)
        else:
            shape = [1] * n
            shape[d] = index.shape[d]
            key.append(torch.arange(index.shape[d], device=index.device).reshape(shape))
    if src.shape != index.shape:  # scatter_add_ reads only src's leading part
        src = src[tuple(slice(0, k) for k in index.shape)]
    return torch.ops.aten.index_put_(x, key, src, True)
