"""A NaN or inf in a convolution or adaptive pooling reaches only the outputs it feeds (issue 12).

The NumPy convolution's flat im2col columns carry junk columns that wrap around the image rows,
and its adaptive pooling multiplies by averaging matrices: both met an inf with a zero there
(0 * inf = NaN). These cases use the LeNet-sized flat geometry and compare with PyTorch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _grads(fn: Callable[..., Any], arrays: list[np.ndarray], dev: em.Device) -> list[np.ndarray]:
    xs = [
        em.Tensor.from_data(a, device=dev.autodiff(), dtype=em.float64).require_grad()
        for a in arrays
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = fn(*xs)
        gs = y.sum().backward()
    return [y.to_numpy()] + [t.grad(gs).to_numpy() for t in xs]


def _torch(fn: Callable[..., Any], arrays: list[np.ndarray]) -> list[np.ndarray]:
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*ts)
    y.sum().backward()
    return [y.detach().numpy()] + [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("poison", ["x", "weight"])
@pytest.mark.parametrize("value", [np.inf, np.nan])
@pytest.mark.parametrize("transposed", [False, True])
def test_conv_nonfinite_reaches_only_what_it_feeds(
    poison: str, value: float, transposed: bool
) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 10, 9))
    w = rng.standard_normal((3, 4, 3, 3) if transposed else (4, 3, 3, 3))
    if poison == "x":
        x[1, 2, 4, 0] = value  # column 0: junk columns wrap onto it
    else:
        w[1, 2, 1, 2] = value  # tap j = 2: its junk columns land in real columns
    if transposed:
        ours = lambda a, b: F.conv_transpose2d(a, b, padding=1)
        ref = lambda a, b: TF.conv_transpose2d(a, b, padding=1)
    else:
        ours = lambda a, b: F.conv2d(a, b, padding=1)
        ref = lambda a, b: TF.conv2d(a, b, padding=1)
    want = _torch(ref, [x, w])
    assert np.isfinite(want[0]).any()  # the poison does not reach every output
    for dev in (em.Device.cpu(), em.Device.torch("cpu")):
        for got, r in zip(_grads(ours, [x, w], dev), want, strict=True):
            np.testing.assert_allclose(got, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,out", [((2, 3, 28, 28), (7, 7)), ((1, 2, 9, 7), (4, 3))])
def test_adaptive_avg_pool_nonfinite_stays_in_its_cells(
    shape: tuple[int, ...], out: tuple[int, int]
) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape)
    x[0, 1, 3, 2], x[0, 1, 5, 5], x[-1, 0, 0, 0] = np.inf, -np.inf, np.nan
    want = _torch(lambda a: TF.adaptive_avg_pool2d(a, out), [x])
    assert np.isfinite(want[0]).mean() > 0.5
    for dev in (em.Device.cpu(), em.Device.torch("cpu")):
        for got, r in zip(
            _grads(lambda a: F.adaptive_avg_pool2d(a, out), [x], dev), want, strict=True
        ):
            np.testing.assert_allclose(got, r, rtol=1e-12, atol=1e-12)


def test_adaptive_avg_pool_backward_of_a_nonfinite_gradient() -> None:
    """An inf upstream gradient spreads over its own window only (no averaging-matrix zeros)."""
    from ember.backend.numpy.kernels.pooling import adaptive_avg_pool2d_backward

    g = np.random.default_rng(7).standard_normal((1, 2, 3, 4))
    g[0, 1, 1, 2] = np.inf
    tg = torch.tensor(g)
    x = torch.zeros((1, 2, 7, 9), dtype=torch.float64, requires_grad=True)
    TF.adaptive_avg_pool2d(x, (3, 4)).backward(tg)
    got = adaptive_avg_pool2d_backward(g, (1, 2, 7, 9))
    np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert np.isfinite(got).mean() > 0.8
