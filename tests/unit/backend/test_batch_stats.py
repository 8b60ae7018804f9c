"""``Backend.batch_stats``: per-channel mean and variance for batch norm's running averages."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.backend.families.optional import OptionalKernels


def _devices() -> list[em.Device]:
    devs = [em.Device.cpu()]
    try:
        import torch  # noqa: F401

        devs.append(em.Device.torch("cpu"))
    except ImportError:
        pass
    return devs


@pytest.mark.parametrize("shape", [(8, 3), (4, 5, 7), (6, 4, 5, 9)])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dev", _devices(), ids=lambda d: d.b.name)
def test_matches_the_definition(dev: em.Device, correction: int, shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(0).normal(loc=3.0, size=shape)  # float64: exact comparison
    raw = em.tensor(x, device=dev)._raw
    flat = np.moveaxis(x, 1, 0).reshape(shape[1], -1)
    want = (flat.mean(axis=1), flat.var(axis=1, ddof=correction))
    fast = dev.b.batch_stats(raw, correction)
    generic = OptionalKernels.batch_stats(dev.b, raw, correction)  # the default
    for got in (fast, generic):
        for g, w in zip(got, want):
            g = dev.b.to_numpy(g)
            assert g.shape == (shape[1],)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_float32_running_statistics_match_torch() -> None:
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).normal(loc=2.0, size=(16, 4, 6, 6)).astype(np.float32)
    bn = em.nn.BatchNorm2d(4)
    bn(em.tensor(x))
    ref = torch.nn.BatchNorm2d(4)
    ref(torch.from_numpy(x))
    # float32 sums over 576 values per channel: a few ulps of the mean's magnitude
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(
            getattr(bn, name).to_numpy(), getattr(ref, name).numpy(), rtol=1e-5, atol=1e-6
        )
