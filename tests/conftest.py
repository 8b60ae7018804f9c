"""Shared fixtures: the backend list, per-test seeding, deterministic torch kernels, and the
hypothesis CI profile."""

from __future__ import annotations

import os
import random
import zlib
from types import ModuleType

import numpy as np
import pytest
from hypothesis import settings

import ember as em

# derandomize: the examples follow from each test's code alone (it implies database=None, so no
# example saved by an earlier run is replayed); a property test cannot fail on a new draw
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
    # torch's autograd thread for a CUDA device may reach cuBLAS before a context is current
    # there; torch then sets the primary context itself and says so. Whether it does depends on
    # which test first runs a CUDA backward in the process (seen once in 800 runs on an H200)
    config.addinivalue_line(
        "filterwarnings", "ignore:Attempting to run cuBLAS, but there was no current CUDA context"
    )
    if _CUDA:
        _exact_torch_kernels()


def _exact_torch_kernels() -> None:
    """CUDA runs compare against CPU references and check Balanced == Disabled bit for bit:
    exact float32 matmuls/convolutions (no TF32) and deterministic cuDNN kernels (the one place
    the suite sets them)."""
    import torch

    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


@pytest.fixture(autouse=True)
def _deterministic_torch() -> None:
    """Exact float32 and deterministic cuDNN for every test (checkpointing compares Balanced with
    Disabled bit for bit); also undoes process-wide switches a test made (``ember train
    --matmul-precision``). A no-op without torch."""
    if _TORCH is not None:
        _exact_torch_kernels()


def _torch() -> ModuleType | None:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _cuda_available() -> bool:
    torch = _torch()
    return torch is not None and bool(torch.cuda.is_available())


_TORCH = _torch()
_CUDA = _cuda_available()


def _seed_of(nodeid: str) -> int:
    """A seed that follows from the test's id alone: the same whether it runs alone or among
    others, in any order."""
    return zlib.crc32(nodeid.encode())


@pytest.fixture
def node_seed(request: pytest.FixtureRequest) -> int:
    """This test's seed (what ``_seed_everything`` seeded every generator with), for generators
    a test module keeps."""
    return _seed_of(request.node.nodeid)


@pytest.fixture(autouse=True)
def _seed_everything(node_seed: int) -> None:
    """Seed every global generator a test may draw from: Python's ``random``, NumPy's legacy
    global generator, torch's (every device, CUDA included) and ember's (``em.seed``)."""
    random.seed(node_seed)
    np.random.seed(node_seed)
    if _TORCH is not None:
        _TORCH.manual_seed(node_seed)  # seeds every CUDA device too
    em.seed(node_seed)


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
