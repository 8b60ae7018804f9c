"""``ember bench gpt``: one training step of a small character GPT (2 layers, width 128, T 64)."""

from __future__ import annotations

from typing import Any

from ..tensor.device import Device
from .models import run_workload


def run(device: Device, repeats: int = 10) -> list[dict[str, Any]]:
    """Median step time of ember and PyTorch; ``ratio = ember / torch``."""
    return run_workload("gpt", device, repeats)
