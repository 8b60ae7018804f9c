"""Shared fixtures: the backend list, a seeded RNG, and the hypothesis CI profile."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

import ember as em

settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None)
settings.register_profile("dev", max_examples=40, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    # hypothesis imports libcst to print a failing example as a patch; libcst triggers a
    # DeprecationWarning from mypy_extensions, which filterwarnings=error would turn into an
    # INTERNALERROR that hides the failure report
    config.addinivalue_line(
        "filterwarnings", "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
    )
    if _cuda_available():
        _exact_cuda_float32()


def _exact_cuda_float32() -> None:
    """CUDA runs compare against CPU references and check Balanced == Disabled bit for bit:
    exact float32 matmuls/convolutions (no TF32) and deterministic cuDNN kernels."""
    import torch

    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


@pytest.fixture(autouse=True)
def _cuda_precision() -> None:
    """Undo process-wide precision switches a test made (``ember train --matmul-precision``)."""
    if _CUDA:
        _exact_cuda_float32()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


_CUDA = _cuda_available()


def _backends() -> list[str]:
    """EMBER_BACKEND (e.g. "numpy,torch,cuda"); by default numpy and torch, plus cuda if present."""
    default = "numpy,torch,cuda" if _CUDA else "numpy,torch"
    names = os.environ.get("EMBER_BACKEND", default).split(",")
    return [n.strip() for n in names if n.strip()]


@pytest.fixture(params=_backends())
def backend(request: pytest.FixtureRequest) -> str:
    """Backend name; torch and cuda are skipped when the PyTorch backend or CUDA is unavailable."""
    name = str(request.param)
    if name in ("torch", "cuda"):
        try:
            em.Device.torch("cpu" if name == "torch" else "cuda:0")
        except em.DeviceError as e:
            pytest.skip(f"{name} backend unavailable: {e}")
    return name


@pytest.fixture
def device(backend: str) -> em.Device:
    """The plain device of the backend under test (NumPy, torch CPU, or the first CUDA GPU)."""
    if backend == "cuda":
        return em.Device.cuda(0)
    return em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")


@pytest.fixture
def rng() -> np.random.Generator:
    em.seed(0)
    return np.random.default_rng(0)
