"""``ember bench mlp``: one training step of ``ember.models.MLP`` (784-256-256-10, batch 128)."""

from __future__ import annotations

from typing import Any

from ..tensor.device import Device
from .models import run_workload


def run(device: Device, repeats: int = 10) -> list[dict[str, Any]]:
    """Median step time of ember and PyTorch; ``ratio = ember / torch``."""
    return run_workload("mlp", device, repeats)
