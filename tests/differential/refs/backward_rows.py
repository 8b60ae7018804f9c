"""PyTorch references of the rows in ``ember/ops/backward_rows.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

REFS: dict[str, Callable[..., Any]] = {
    "softplus": lambda x: torch.nn.functional.softplus(x),
}
