"""Gradient checkpointing strategies (SEMANTICS.md §7)."""

from __future__ import annotations

import enum


class GradientCheckpointingStrategy(enum.Enum):
    """How an autodiff tensor's ops keep what backward needs.

    ``Disabled`` (the default): every op keeps what its backward reads.
    ``Balanced``: memory-bound ops keep only a recipe (their op and parents) and are recomputed
    during backward, once, from the nearest kept ancestors; compute-bound ops keep their outputs.
    """

    Disabled = "disabled"
    Balanced = "balanced"

    def __repr__(self) -> str:
        return f"GradientCheckpointingStrategy.{self.name}"
