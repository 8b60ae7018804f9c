"""PyTorch spellings of the reductions (issue 18): argmax/argmin, max/min(dim), var/std.

Each case runs ember and PyTorch on the same seeded input and compares values, shapes and
dtypes; the Burn ``_dim`` forms keep their reduced dim.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

DIMS = [None, 0, 1, -1]
DTYPES = {
    "float32": (em.float32, torch.float32),
    "float64": (em.float64, torch.float64),
    "int64": (em.int64, torch.int64),
}


def _data(dtype_name: str, shape: tuple[int, ...] = (4, 5)) -> np.ndarray:
    rng = np.random.default_rng(18)
    if dtype_name == "int64":
        return rng.integers(-3, 4, size=shape)  # small range: ties, first index must win
    return rng.normal(size=shape)


def _pair(device: em.Device, a: np.ndarray, dtype_name: str) -> tuple[em.Tensor, torch.Tensor]:
    edt, tdt = DTYPES[dtype_name]
    return em.Tensor.from_data(a, device=device, dtype=edt), torch.tensor(a, dtype=tdt)


def _same(got: em.Tensor, want: torch.Tensor, rtol: float = 0.0) -> None:
    assert got.shape == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.to_numpy(), want.numpy(), rtol=rtol)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremum_matches_torch(
    device: em.Device, op: str, dim: int | None, keepdim: bool, dtype_name: str
) -> None:
    x, t = _pair(device, _data(dtype_name), dtype_name)
    _same(getattr(x, op)(dim, keepdim=keepdim), getattr(t, op)(dim, keepdim=keepdim))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremum_defaults_and_zero_d(device: em.Device, op: str) -> None:
    x, t = _pair(device, _data("float32", (2, 3, 4)), "float32")
    _same(getattr(x, op)(), getattr(t, op)())  # flattened index, 0-d
    _same(getattr(x, op)(1), getattr(t, op)(1))
    s, ts = _pair(device, np.array(2.5), "float32")
    for dim in (None, 0, -1):
        _same(getattr(s, op)(dim), getattr(ts, op)(dim))
    with pytest.raises(em.ShapeError, match=rf"^{op}: .*expected a non-empty tensor"):
        getattr(em.Tensor.zeros((0, 3), device=device), op)()
    with pytest.raises(em.DTypeError, match=rf"^{op}: keepdim must be a bool"):
        getattr(x, op)(0, 1)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_dim_gives_values_and_indices(
    device: em.Device, op: str, dim: int, keepdim: bool, dtype_name: str
) -> None:
    x, t = _pair(device, _data(dtype_name), dtype_name)
    got, want = getattr(x, op)(dim, keepdim=keepdim), getattr(t, op)(dim, keepdim=keepdim)
    values, indices = got  # unpacks like torch.return_types.max
    _same(values, want.values)
    _same(indices, want.indices)
    _same(got.values, want.values)
    _same(got.indices, want.indices)


def test_max_without_dim_and_burn_forms_keep_their_behaviour(device: em.Device) -> None:
    a = _data("float32", (3, 4))
    x, t = _pair(device, a, "float32")
    _same(x.max(), t.max())
    _same(x.min(), t.min())
    _same(x.max_dim(1), t.amax(1, keepdim=True))
    _same(x.min_dim(0), t.amin(0, keepdim=True))
    _same(x.sum_dim(1), t.sum(1, keepdim=True), rtol=1e-6)
    _same(x.mean_dim(0), t.mean(0, keepdim=True), rtol=1e-6)


def test_max_dim_gradient_goes_to_the_first_maximum(device: em.Device) -> None:
    a = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64).require_grad()
    t = torch.tensor(a, requires_grad=True)
    values, _ = x.max(1)
    grads = (values * em.tensor([2.0, 5.0], device=device, dtype=em.float64)).sum().backward()
    tv, _ = t.max(1)
    (tv * torch.tensor([2.0, 5.0], dtype=torch.float64)).sum().backward()
    g = x.grad(grads)
    assert g is not None and t.grad is not None
    np.testing.assert_array_equal(g.to_numpy(), t.grad.numpy())


VAR_DIMS = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("correction", [1, 0])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", VAR_DIMS)
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_var_std_match_torch(
    device: em.Device,
    dtype_name: str,
    op: str,
    dim: int | tuple[int, ...] | None,
    keepdim: bool,
    correction: int,
) -> None:
    x, t = _pair(device, _data(dtype_name, (3, 4, 5)), dtype_name)
    rtol = 1e-5 if dtype_name == "float32" else 1e-12  # a two-pass sum over <= 60 elements
    got = getattr(x, op)(dim, keepdim, correction=correction)
    _same(got, getattr(t, op)(dim, keepdim=keepdim, correction=correction), rtol=rtol)


def test_var_gradient_over_several_dims_matches_torch(device: em.Device) -> None:
    a = _data("float64", (3, 4, 5))
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64).require_grad()
    t = torch.tensor(a, requires_grad=True)
    w = np.arange(1.0, 5.0)
    grads = (x.std((0, 2)) * em.Tensor.from_data(w, device=device)).sum().backward()
    (t.std((0, 2)) * torch.tensor(w)).sum().backward()
    g = x.grad(grads)
    assert g is not None and t.grad is not None
    np.testing.assert_allclose(g.to_numpy(), t.grad.numpy(), rtol=1e-10)


def test_var_rejects_the_old_positional_correction(device: em.Device) -> None:
    x = em.tensor([[1.0, 2.0, 4.0]], device=device)
    with pytest.raises(em.DTypeError, match=r"^var: keepdim must be a bool, got 0"):
        x.var(1, 0)


def test_accuracy_line_matches_torch(device: em.Device) -> None:
    # the shape pattern: 4 rows of logits, (4,) int labels, 3 of 4 right
    logits = np.array([[2.0, 0.1, 0.3], [0.2, 1.5, 0.1], [0.3, 0.2, 0.9], [1.0, 2.0, 0.5]])
    y = np.array([0, 1, 2, 0])
    el = em.Tensor.from_data(logits, device=device, dtype=em.float32)
    ey = em.Tensor.from_data(y, device=device, dtype=em.int64)
    acc = (el.argmax(1) == ey).float().mean()
    want = (torch.tensor(logits).argmax(1) == torch.tensor(y)).float().mean()
    assert acc.shape == () and acc.item() == want.item() == 0.75
