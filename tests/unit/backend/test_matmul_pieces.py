"""``Backend.matmul_acc`` and ``Backend.matmul_rows``: products summed or assembled piece by piece
(the fused linear + cross-entropy backward's input and weight gradients), fast and default."""

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


@pytest.mark.parametrize("dev", _devices(), ids=lambda d: d.b.name)
@pytest.mark.parametrize("default", [False, True], ids=["backend", "default"])
def test_pieces_equal_one_product(dev: em.Device, default: bool) -> None:
    """float64: the summed and assembled pieces equal the whole products to rounding."""
    rng = np.random.default_rng(0)
    d = rng.normal(size=(6, 10))  # (N, V), its columns in chunks of 4, 4, 2
    w = rng.normal(size=(10, 5))  # (V, K)
    x = rng.normal(size=(6, 5))  # (N, K)
    b = dev.b
    acc_fn = (lambda *a: OptionalKernels.matmul_acc(b, *a)) if default else b.matmul_acc
    rows_fn = (lambda *a: OptionalKernels.matmul_rows(b, *a)) if default else b.matmul_rows
    xr = em.tensor(x, device=dev)._raw
    gx = gw = None
    for lo, hi in ((0, 4), (4, 8), (8, 10)):
        dc = em.tensor(d[:, lo:hi], device=dev)._raw
        gx = acc_fn(gx, dc, em.tensor(w[lo:hi], device=dev)._raw)
        gw = rows_fn(gw, 10, lo, dc.T, xr)
    np.testing.assert_allclose(b.to_numpy(gx), d @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.to_numpy(gw), d.T @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dev", _devices(), ids=lambda d: d.b.name)
def test_the_first_piece_is_not_aliased_to_an_input(dev: em.Device) -> None:
    """The accumulator starts as a fresh product: adding into it leaves the operands alone."""
    rng = np.random.default_rng(1)
    x, y = (em.tensor(rng.normal(size=(3, 3)), device=dev)._raw for _ in range(2))
    x0 = dev.b.to_numpy(x).copy()
    acc = dev.b.matmul_acc(None, x, y)
    dev.b.matmul_acc(acc, x, y)
    np.testing.assert_array_equal(dev.b.to_numpy(x), x0)
