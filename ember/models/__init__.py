"""Models used by the ``ember`` command: ``MLP`` and ``CNN`` classifiers and a character ``GPT``.

``build_model(config, device)`` rebuilds a model from the JSON config that ``ember train`` writes
next to its records, so ``ember eval`` and ``ember generate`` can load them.
"""

from __future__ import annotations

from typing import Any

from .._core.device import Device
from .gpt import GPT as GPT
from .gpt import GPTConfig as GPTConfig
from .vision import CNN as CNN
from .vision import MLP as MLP

MODELS = ("mlp", "cnn", "gpt")


def build_model(config: dict[str, Any], device: Device) -> Any:
    """A fresh model from ``{"model": "mlp"|"cnn"|"gpt", "args": {...}}`` on ``device``.

    Example:
        >>> build_model({"model": "mlp", "args": {"in_features": 64}}, em.Device.cpu())
        MLP(...)
    """
    name = config.get("model")
    args = dict(config.get("args", {}))
    if name == "mlp":
        return MLP(**args, device=device)
    if name == "cnn":
        return CNN(**args, device=device)
    if name == "gpt":
        return GPT(GPTConfig(**args), device=device)
    raise ValueError(f"build_model: expected model one of {MODELS}, got {name!r}.")
