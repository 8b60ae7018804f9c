"""PyTorch references for the issue-3 tensor rows (select ... round), keyed by row name.

Each reference takes the row's inputs as torch tensors (int64 for index inputs) and its attrs
as keywords, and returns the torch result, so a suite can compare values and autograd gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Ref = Callable[..., torch.Tensor]


def _select(x: torch.Tensor, indices: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.index_select(x, dim, indices)


def _gather(x: torch.Tensor, indices: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.gather(x, dim, indices)


def _scatter(
    x: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, dim: int
) -> torch.Tensor:
    return torch.scatter_add(x, dim, indices, values)


def _slice_assign(x: torch.Tensor, values: torch.Tensor, key: Any) -> torch.Tensor:
    out = x.clone()
    out[key] = values
    return out


def _repeat_dim(x: torch.Tensor, dim: int, times: int) -> torch.Tensor:
    reps = [1] * x.ndim
    reps[dim] = times
    return x.repeat(reps)


def _sort(x: torch.Tensor, dim: int, descending: bool) -> torch.Tensor:
    return torch.sort(x, dim=dim, descending=descending, stable=True).values


def _argsort(x: torch.Tensor, dim: int, descending: bool) -> torch.Tensor:
    return torch.sort(x, dim=dim, descending=descending, stable=True).indices


REFS: dict[str, Ref] = {
    "select": _select,
    "gather": _gather,
    "scatter": _scatter,
    "slice_assign": _slice_assign,
    "flip": lambda x, dims: torch.flip(x, tuple(dims)),
    "repeat_dim": _repeat_dim,
    "tril": lambda x, diagonal: torch.tril(x, diagonal),
    "triu": lambda x, diagonal: torch.triu(x, diagonal),
    "sort": _sort,
    "argsort": _argsort,
    "var": lambda x, dim, correction: torch.var(x, dim, correction=correction, keepdim=True),
    "prod_dim": lambda x, dim: torch.prod(x, dim, keepdim=True),
    "cumsum": lambda x, dim: torch.cumsum(x, dim),
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
}
