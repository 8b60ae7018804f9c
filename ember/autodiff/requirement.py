"""What a tracked node needs from backward (SEMANTICS.md §2)."""

from __future__ import annotations

import enum


class Requirement(enum.Enum):
    """``GRAD``: a leaf whose gradient is kept. ``GRAD_IN_BACKWARD``: an op result that only passes
    its gradient on. Untracked tensors have no node at all."""

    GRAD = "grad"
    GRAD_IN_BACKWARD = "grad_in_backward"
