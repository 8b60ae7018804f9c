"""sort, argsort and topk against PyTorch: values, indices, stability and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

from .opcheck import check_forward, check_grads

SHAPES = [((3, 5), 1), ((4, 3), 0), ((2, 3, 4), -1), ((2, 1, 4), 1), ((3, 0), 1), ((6,), 0)]


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(("shape", "dim"), SHAPES)
def test_sort_and_argsort(
    device: em.Device, shape: tuple[int, ...], dim: int, descending: bool
) -> None:
    a = np.random.default_rng(0).normal(size=shape)

    def ref(x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=dim, descending=descending, stable=True).values

    def ref_idx(x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=dim, descending=descending, stable=True).indices

    check_forward(lambda x: x.sort(dim, descending), ref, [a], device)
    got = check_forward(lambda x: x.argsort(dim, descending), ref_idx, [a], device)
    assert got.dtype is em.int64
    check_grads(lambda x: x.sort(dim, descending), ref, [a], device)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_ties(device: em.Device, descending: bool) -> None:
    a = np.array([[2, 1, 2, 0, 1, 2], [5, 5, 5, 5, 5, 5]], dtype=np.int64)
    want = torch.sort(torch.from_numpy(a), dim=1, descending=descending, stable=True)
    x = em.tensor(a, device=device)
    np.testing.assert_array_equal(x.argsort(1, descending).to_numpy(), want.indices.numpy())
    np.testing.assert_array_equal(x.sort(1, descending).to_numpy(), want.values.numpy())
    assert x.sort(1).dtype is em.int64


def test_sort_non_contiguous(device: em.Device) -> None:
    a = np.random.default_rng(1).normal(size=(4, 3))
    check_grads(lambda x: x.transpose().sort(1), lambda x: x.T.sort(1).values, [a], device)


@pytest.mark.parametrize(
    ("shape", "k", "dim"), [((3, 6), 2, 1), ((5, 3), 5, 0), ((2, 3, 4), 1, -1), ((3, 4), 0, 1)]
)
def test_topk_values(device: em.Device, shape: tuple[int, ...], k: int, dim: int) -> None:
    a = np.random.default_rng(2).normal(size=shape)
    check_forward(lambda x: x.topk(k, dim), lambda x: x.topk(k, dim).values, [a], device)
    check_grads(lambda x: x.topk(k, dim), lambda x: x.topk(k, dim).values, [a], device)


def test_sorting_errors(device: em.Device) -> None:
    x = em.Tensor.zeros((3, 4), device=device)
    with pytest.raises(em.ShapeError, match=r"topk: k 5 is out of range for dim 1 of size 4"):
        x.topk(5, 1)
    with pytest.raises(em.ShapeError, match="sort: dim 2 is out of range"):
        x.sort(2)
    with pytest.raises(em.DTypeError, match="sort: expected a numeric"):
        em.Tensor.zeros((3,), device=device, dtype=em.bool).sort(0)
    with pytest.raises(em.DTypeError, match="argsort: expected a bool for descending"):
        x.argsort(0, "yes")  # type: ignore[arg-type]
