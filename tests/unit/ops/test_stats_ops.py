"""var, prod, cumsum, full max/min and floor/ceil/round against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

from .opcheck import check_forward, check_grads


@pytest.mark.parametrize("correction", [1, 0])
@pytest.mark.parametrize(("shape", "dim"), [((3, 4), 1), ((4, 3), 0), ((2, 3, 4), -1), ((5, 1), 0)])
def test_var(device: em.Device, shape: tuple[int, ...], dim: int, correction: int) -> None:
    a = np.random.default_rng(0).normal(size=shape)

    def ref(x: torch.Tensor) -> torch.Tensor:
        return torch.var(x, dim, correction=correction, keepdim=True)

    check_forward(lambda x: x.var(dim, keepdim=True, correction=correction), ref, [a], device)
    check_grads(lambda x: x.var(dim, keepdim=True, correction=correction), ref, [a], device)


def test_var_default_is_unbiased_and_degenerate_sizes(device: em.Device) -> None:
    x = em.tensor([[1.0, 2.0, 3.0, 4.0]], device=device)
    assert x.var(1).item() == pytest.approx(5.0 / 3.0)  # n - 1 = 3, as Burn and PyTorch
    assert x.var(1, correction=0).item() == pytest.approx(1.25)
    assert np.isnan(x.var(0).to_numpy()).all()  # one sample, unbiased: 0 / 0
    assert np.isnan(em.Tensor.zeros((0, 2), device=device).var(0).to_numpy()).all()
    with pytest.raises(em.DTypeError, match="var: expected a float tensor, got int64"):
        em.tensor([1, 2], device=device).var(0)


def test_var_non_contiguous(device: em.Device) -> None:
    a = np.random.default_rng(1).normal(size=(3, 5))
    check_grads(
        lambda x: x.transpose().var(1, keepdim=True),
        lambda x: x.T.var(1, keepdim=True),
        [a],
        device,
    )


def _with_zeros(shape: tuple[int, ...], zeros: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape)
    flat = a.reshape(-1)
    flat[rng.choice(flat.size, size=zeros, replace=False)] = 0.0
    return a


@pytest.mark.parametrize("zeros", [0, 1, 2])
def test_prod_gradient_with_zeros(device: em.Device, zeros: int) -> None:
    a = _with_zeros((2, 3), zeros, seed=zeros)
    check_forward(lambda x: x.prod(), lambda x: x.prod(), [a], device)
    check_grads(lambda x: x.prod(), lambda x: x.prod(), [a], device)


@pytest.mark.parametrize(("shape", "dim"), [((3, 4), 1), ((4, 3), 0), ((2, 3, 4), -2), ((3, 0), 1)])
def test_prod_dim(device: em.Device, shape: tuple[int, ...], dim: int) -> None:
    a = _with_zeros(shape, 2 if np.prod(shape) > 2 else 0, seed=3)
    check_forward(lambda x: x.prod_dim(dim), lambda x: x.prod(dim, keepdim=True), [a], device)
    check_grads(lambda x: x.prod_dim(dim), lambda x: x.prod(dim, keepdim=True), [a], device)


def test_prod_of_ints_and_empty(device: em.Device) -> None:
    assert em.tensor([[2, 3], [4, 1]], device=device).prod().item() == 24
    assert em.Tensor.zeros((0,), device=device).prod().item() == 1.0


@pytest.mark.parametrize(("shape", "dim"), [((3, 4), 1), ((4, 3), 0), ((2, 3, 4), -1), ((3, 0), 1)])
def test_cumsum(device: em.Device, shape: tuple[int, ...], dim: int) -> None:
    a = np.random.default_rng(4).normal(size=shape)
    check_forward(lambda x: x.cumsum(dim), lambda x: x.cumsum(dim), [a], device)
    check_grads(lambda x: x.cumsum(dim), lambda x: x.cumsum(dim), [a], device)
    if len(shape) == 2:  # non-contiguous input
        check_grads(lambda x: x.transpose().cumsum(0), lambda x: x.T.cumsum(0), [a], device)


def test_cumsum_ints(device: em.Device) -> None:
    got = em.tensor([[1, 2, 3]], device=device).cumsum(1)
    assert got.dtype is em.int64 and got.tolist() == [[1, 3, 6]]
    with pytest.raises(em.DTypeError, match="cumsum: expected a numeric"):
        em.Tensor.zeros((2,), device=device, dtype=em.bool).cumsum(0)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape", [(3, 4), (5,), (), (2, 1, 3)])
def test_full_max_min(device: em.Device, op: str, shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(5).normal(size=shape)
    got = check_forward(lambda x: getattr(x, op)(), lambda x: getattr(x, op)(), [a], device)
    assert got.shape == ()
    check_grads(lambda x: getattr(x, op)(), lambda x: getattr(x, op)(), [a], device)


def test_full_max_min_ints_and_empty(device: em.Device) -> None:
    x = em.tensor([[3, 9], [-4, 2]], device=device)
    assert x.max().item() == 9 and x.min().item() == -4
    with pytest.raises(em.ShapeError, match="max: expected a non-empty tensor"):
        em.Tensor.zeros((0, 3), device=device).max()


@pytest.mark.parametrize("op", ["floor", "ceil", "round"])
def test_rounding_values_and_zero_gradient(device: em.Device, op: str) -> None:
    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.2, 0.7, 3.0, 2.49])  # halves to even
    got = check_forward(lambda x: getattr(x, op)(), lambda x: getattr(torch, op)(x), [a], device)
    assert got.dtype is em.float64
    x = em.tensor(a, device=device.autodiff(), dtype="float64").require_grad()
    g = x.grad((getattr(x, op)() + x * 0.5).sum().backward())
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), np.full(a.shape, 0.5))  # rounding adds 0
    i = em.tensor([1, -2], device=device)
    assert getattr(i, op)() is i
    with pytest.raises(em.DTypeError, match=f"{op}: expected a numeric tensor, got bool"):
        getattr(em.tensor([True], device=device), op)()
