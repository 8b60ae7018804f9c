"""Bit-for-bit comparisons need deterministic kernels on every backend."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _deterministic_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN picks non-deterministic convolution backward kernels by default, so on CUDA even two
    Disabled runs differ in the last bit; checkpointing is compared with deterministic kernels."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the NumPy backend needs nothing
        return
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
