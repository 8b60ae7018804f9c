"""Slices with negative steps, as NumPy (and Burn) read them: ``t[::-1]``, ``t[5:1:-2]`` and
``slice_assign`` with them; values against NumPy, gradients against the scatter of the incoming
gradient into the visited positions, on both backends (PyTorch tensors have no negative steps:
ember's torch backend reaches them through a positive step and a flip)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

A = np.arange(60.0).reshape(3, 4, 5)
KEYS: list[Any] = [
    slice(None, None, -1),
    (slice(None), slice(None, None, -2)),
    (Ellipsis, slice(3, 0, -2)),
    (None, 1, slice(-1, -5, -3)),
    (slice(2, None, -1), 0, slice(None, None, -1)),
    (0, Ellipsis, slice(4, 1, -1), None),
    (slice(0, 0, -1),),  # empty
    (slice(10, -10, -1), slice(-100, 100, 3)),  # out-of-range bounds clip, as NumPy
    (slice(1, 3), slice(None, None, -3), 2),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_values_and_gradients(device: em.Device, key: Any) -> None:
    x = em.Tensor.from_data(A, device=device.autodiff(), dtype=em.float64).require_grad()
    got = x[key]
    want = A[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.to_numpy(), want)
    g = np.random.default_rng(0).standard_normal(want.shape)
    grads = (got * em.Tensor.from_data(g, device=device, dtype=em.float64)).sum().backward()
    expect = np.zeros_like(A)
    expect[key] = g  # basic slices visit each position at most once
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), expect)


@pytest.mark.parametrize(
    ("ranges", "values_shape"),
    [
        ([slice(None, None, -1)], (4, 5)),  # broadcast over dim 0
        ([slice(None), slice(3, 0, -2)], (3, 2, 5)),
        ([1, slice(None, None, -1), slice(4, None, -4)], (4, 2)),
        ([slice(2, 0, -1), Ellipsis, slice(None, None, -2)], (1, 3)),
    ],
    ids=repr,
)
def test_slice_assign(device: em.Device, ranges: list[Any], values_shape: tuple[int, ...]) -> None:
    v = -np.arange(float(np.prod(values_shape))).reshape(values_shape) - 1.0
    x = em.Tensor.from_data(A, device=device.autodiff(), dtype=em.float64).require_grad()
    vt = em.Tensor.from_data(v, device=device.autodiff(), dtype=em.float64).require_grad()
    out = x.slice_assign(ranges, vt)
    want = A.copy()
    want[tuple(ranges)] = v
    np.testing.assert_array_equal(out.to_numpy(), want)
    g = np.random.default_rng(1).standard_normal(A.shape)
    grads = (out * em.Tensor.from_data(g, device=device, dtype=em.float64)).sum().backward()
    gx = g.copy()
    gx[tuple(ranges)] = 0.0
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), gx)
    region = g[tuple(ranges)]  # the values' gradient: the region's, summed over broadcast dims
    gv = region.reshape((-1,) + values_shape).sum(0) if region.ndim > len(values_shape) else region
    gv = gv.sum(axis=tuple(i for i, n in enumerate(values_shape) if n == 1), keepdims=True)
    np.testing.assert_allclose(vt.grad(grads).to_numpy(), gv.reshape(values_shape), rtol=1e-12)


def test_zero_step_is_an_error(device: em.Device) -> None:
    x = em.Tensor.from_data(A, device=device)
    with pytest.raises(em.ShapeError, match="step cannot be zero"):
        x[::0]
    with pytest.raises(em.ShapeError, match="do not fit the region"):
        x.slice_assign([slice(None, None, -1)], em.Tensor.ones((2, 2), device=device))
