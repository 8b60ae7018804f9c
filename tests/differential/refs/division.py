"""PyTorch references of the rows in ``ember/ops/division.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _floor_divide(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # torch defines no derivative for floor_divide; the quotient is piecewise constant, so its
    # gradient is zero almost everywhere (what ember's row gives): add x and y times zero
    q = torch.floor_divide(x.detach(), y.detach())
    for t in (x, y):
        if t.requires_grad:
            q = q + t * 0
    return q


REFS: dict[str, Callable[..., Any]] = {
    "floor_divide": _floor_divide,
    "remainder": torch.remainder,
}
