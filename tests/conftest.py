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


def _backends() -> list[str]:
    names = os.environ.get("EMBER_BACKEND", "numpy,torch").split(",")
    return [n.strip() for n in names if n.strip()]


@pytest.fixture(params=_backends())
def backend(request: pytest.FixtureRequest) -> str:
    """Backend name; torch is skipped when the PyTorch backend is unavailable."""
    name = str(request.param)
    if name == "torch":
        try:
            em.Device.torch("cpu")
        except em.DeviceError as e:
            pytest.skip(f"torch backend unavailable: {e}")
    return name


@pytest.fixture
def device(backend: str) -> em.Device:
    """The plain CPU device of the backend under test."""
    return em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")


@pytest.fixture
def rng() -> np.random.Generator:
    em.seed(0)
    return np.random.default_rng(0)
