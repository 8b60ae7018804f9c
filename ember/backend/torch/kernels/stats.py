"""Statistics a torch forward kernel remembers for its backward, and the shared aliases.

Backward kernels of layer norm, batch norm, max pooling and fused attention need statistics that
the forward computed (mean and rstd, argmax indices, log-sum-exp). The forward remembers them on
its input tensor object (``_remember``); the backward, handed that same object by ember's engine,
reuses them, and recomputes them when they are missing (for example when gradient checkpointing
recomputed the input).
"""

from __future__ import annotations

from typing import Any

import torch

Tensor = torch.Tensor
Pair = tuple[int, int]
aten = torch.ops.aten


def _remember(owner: Tensor, tag: str, ident: tuple[Any, ...], value: Any) -> None:
    """Keep ``value`` on ``owner`` for the backward of the same call (``ident`` names it)."""
    owner.__dict__["_ember_" + tag] = (ident, value)


def _recall(owner: Tensor, tag: str, ident: tuple[Any, ...]) -> Any:
    entry = owner.__dict__.get("_ember_" + tag)
    if entry is None:
        return None
    old, value = entry
    if len(old) != len(ident) or any(
        (a is not b) if isinstance(a, torch.Tensor) else (a != b) for a, b in zip(old, ident)
    ):
        return None
    return value
