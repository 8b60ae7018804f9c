"""``ember bench cnn``: one training step of ``ember.models.CNN`` on 28x28 images, batch 64."""

from __future__ import annotations

from typing import Any

from ..tensor.device import Device
from .models import run_workload


def run(device: Device, repeats: int = 10) -> list[dict[str, Any]]:
    """Median step time of ember and PyTorch; ``ratio = ember / torch``."""
    return run_workload("cnn", device, repeats)
