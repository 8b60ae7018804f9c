"""Run the functional comparisons of this package on every backend (numpy, torch)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ember as em

from . import compare


@pytest.fixture(autouse=True)
def _functional_backend(device: em.Device) -> Iterator[None]:
    compare.use(device.autodiff())
    yield
    compare.use(compare.AD)
