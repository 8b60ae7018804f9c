"""select, gather, scatter (add), slice_assign and advanced [] indexing: values and gradients
against PyTorch and finite differences, size-0/size-1 dims, negative dims, non-contiguous
inputs, and the errors raised for bad indices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

from .opcheck import check_forward, check_grads

i64 = np.int64


# ---------------------------------------------------------------- select
@pytest.mark.parametrize(
    ("shape", "dim", "indices"),
    [
        ((4, 3), 0, [3, 0, 3, 1]),
        ((2, 5, 3), 1, [4, 4]),
        ((2, 5, 3), -1, [2, 0, 1, 2]),
        ((1, 3), 0, [0, 0, 0]),
        ((3, 4), 1, []),
        ((0, 4), 1, [1, 3]),
    ],
)
def test_select_matches_torch(
    device: em.Device, shape: tuple[int, ...], dim: int, indices: list[int]
) -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=shape), np.array(indices, dtype=i64)]
    check_forward(
        lambda x, i: x.select(dim, i), lambda x, i: x.index_select(dim, i), arrays, device
    )
    check_grads(lambda x, i: x.select(dim, i), lambda x, i: x.index_select(dim, i), arrays, device)


def test_select_non_contiguous_and_int(device: em.Device) -> None:
    rng = np.random.default_rng(2)
    arrays = [rng.normal(size=(5, 4)), np.array([0, 2, 2], dtype=i64)]
    check_grads(
        lambda x, i: x.transpose().select(1, i),
        lambda x, i: x.T.index_select(1, i),
        arrays,
        device,
    )
    ints = em.Tensor.arange(0, 6, device=device).reshape((2, 3))
    got = ints.select(1, em.tensor([2, 0], device=device))
    assert got.dtype is em.int64 and got.tolist() == [[2, 0], [5, 3]]


# ---------------------------------------------------------------- gather
@pytest.mark.parametrize(
    ("shape", "dim", "ishape"),
    [
        ((3, 4), 1, (3, 6)),
        ((4, 3), 0, (2, 3)),
        ((2, 3, 4), -2, (2, 5, 4)),
        ((2, 3, 4), 2, (1, 2, 2)),  # smaller than the input on the other dims
        ((3, 1), 1, (3, 4)),
        ((3, 4), 1, (3, 0)),
    ],
)
def test_gather_matches_torch(
    device: em.Device, shape: tuple[int, ...], dim: int, ishape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=shape), rng.integers(0, shape[dim], size=ishape).astype(i64)]
    check_forward(lambda x, i: x.gather(dim, i), lambda x, i: x.gather(dim, i), arrays, device)
    check_grads(lambda x, i: x.gather(dim, i), lambda x, i: x.gather(dim, i), arrays, device)


def test_gather_non_contiguous(device: em.Device) -> None:
    rng = np.random.default_rng(4)
    arrays = [rng.normal(size=(4, 3)), rng.integers(0, 4, size=(3, 5)).astype(i64)]
    check_grads(
        lambda x, i: x.transpose().gather(1, i),
        lambda x, i: x.T.gather(1, i),
        arrays,
        device,
    )


# ---------------------------------------------------------------- scatter
@pytest.mark.parametrize(
    ("shape", "dim", "ishape"),
    [
        ((3, 4), 1, (3, 6)),  # more values than slots: repeats add up
        ((4, 3), 0, (2, 3)),
        ((2, 3, 4), -1, (2, 2, 3)),
        ((3, 4), 0, (0, 4)),
    ],
)
def test_scatter_adds_like_torch(
    device: em.Device, shape: tuple[int, ...], dim: int, ishape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(5)
    idx = rng.integers(0, shape[dim], size=ishape).astype(i64)
    arrays = [rng.normal(size=shape), idx, rng.normal(size=ishape)]

    def f(x: em.Tensor, i: em.Tensor, v: em.Tensor) -> em.Tensor:
        return x.scatter(dim, i, v)

    def ref(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.scatter_add(x, dim, i, v)

    check_forward(f, ref, arrays, device)
    check_grads(f, ref, arrays, device)


def test_scatter_promotes_and_keeps_receiver(device: em.Device) -> None:
    x = em.Tensor.zeros((3,), device=device, dtype=em.int64)
    out = x.scatter(
        0, em.tensor([2, 2, 0], device=device), em.tensor([1.5, 1.0, 2.0], device=device)
    )
    assert out.dtype is em.float32 and out.tolist() == [2.0, 0.0, 2.5]
    assert x.tolist() == [0, 0, 0]


# ---------------------------------------------------------------- slice_assign
@pytest.mark.parametrize(
    ("shape", "ranges", "vshape"),
    [
        ((4, 5), (slice(1, 3), slice(0, 3)), (2, 3)),
        ((3, 4), (slice(None), slice(0, 4, 2)), (3, 2)),
        ((2, 3, 4), (1, slice(0, 2)), (4,)),  # int entry and broadcast values
        ((4, 3), (slice(-2, None),), (1, 3)),
        ((4, 3), (slice(2, 2),), (0, 3)),
        ((2, 3), (slice(None), slice(None)), (2, 3)),  # the whole tensor
    ],
)
def test_slice_assign_matches_torch(
    device: em.Device, shape: tuple[int, ...], ranges: tuple[object, ...], vshape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(6)
    arrays = [rng.normal(size=shape), rng.normal(size=vshape)]

    def ref(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        out[ranges] = v
        return out

    check_forward(lambda x, v: x.slice_assign(list(ranges), v), ref, arrays, device)
    check_grads(lambda x, v: x.slice_assign(list(ranges), v), ref, arrays, device)


def test_slice_assign_leaves_receiver(device: em.Device) -> None:
    x = em.Tensor.ones((2, 2), device=device)
    y = x.slice_assign([slice(0, 1)], em.Tensor.zeros((1, 2), device=device))
    assert y.tolist() == [[0.0, 0.0], [1.0, 1.0]] and x.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# ---------------------------------------------------------------- advanced [] indexing
def _keys() -> list[tuple[str, tuple[int, ...], object]]:
    i = lambda *v: np.array(v, dtype=i64)
    return [
        ("int1d", (5, 3), (i(4, 0, 4, -1),)),
        ("int2d", (5, 3), (np.array([[0, 1], [4, 4]], dtype=i64),)),
        ("pair", (4, 5), (i(0, 3, 3), i(4, -5, 2))),
        ("broadcast", (4, 5), (np.array([[0], [3]], dtype=i64), i(1, 2, 1))),
        ("slice_then_int", (3, 4, 5), (slice(None), i(0, 3))),
        ("separated", (3, 4, 5), (i(0, 2), slice(1, 3), i(4, 0))),
        ("int_and_tensor", (3, 4, 5), (1, slice(None), i(2, 2))),  # PyTorch's layout
        ("int_between", (3, 4, 5), (i(0, 2), 1, i(4, 0))),
        ("adjacent_mid", (3, 4, 5), (slice(None), i(1, 3), i(0, 4))),
        ("ellipsis", (2, 3, 4), (Ellipsis, i(3, 0))),
        ("none", (3, 4), (None, i(2, 0), slice(1, None))),
        ("empty", (3, 4), (np.zeros((0,), dtype=i64),)),
        ("zero_d", (3, 4), (np.array(2, dtype=i64),)),
        ("size0_dim", (0, 4), (slice(None), i(3, 0))),
    ]


@pytest.mark.parametrize(("name", "shape", "key"), _keys(), ids=[k[0] for k in _keys()])
def test_int_tensor_indexing_matches_torch(
    device: em.Device, name: str, shape: tuple[int, ...], key: tuple[object, ...]
) -> None:
    rng = np.random.default_rng(7)
    a = rng.normal(size=shape)

    def em_key() -> tuple[object, ...]:
        return tuple(em.tensor(k, device=device) if isinstance(k, np.ndarray) else k for k in key)

    def t_key() -> tuple[object, ...]:
        return tuple(torch.from_numpy(k) if isinstance(k, np.ndarray) else k for k in key)

    check_forward(lambda x: x[em_key()], lambda x: x[t_key()], [a], device)
    check_grads(lambda x: x[em_key()], lambda x: x[t_key()], [a], device)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (5,), (0, 3)])
def test_bool_mask_selects_flattened(device: em.Device, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(8)
    a = rng.normal(size=shape)
    mask = a > 0.2
    m = em.tensor(mask, device=device)
    tm = torch.from_numpy(mask)
    got = check_forward(lambda x: x[m], lambda x: x[tm], [a], device)
    assert got.ndim == 1
    check_grads(lambda x: x[m], lambda x: x[tm], [a], device)


def test_bool_mask_on_leading_dims_and_lists(device: em.Device) -> None:
    rng = np.random.default_rng(9)
    a = rng.normal(size=(4, 3, 2))
    rows = np.array([True, False, True, True])
    grid = rng.random((4, 3)) < 0.5
    check_grads(
        lambda x: x[em.tensor(rows, device=device)],
        lambda x: x[torch.from_numpy(rows)],
        [a],
        device,
    )
    check_grads(
        lambda x: x[:, :, 1][em.tensor(grid, device=device)],
        lambda x: x[:, :, 1][torch.from_numpy(grid)],
        [a],
        device,
    )
    x = em.tensor(a, device=device)
    np.testing.assert_array_equal(x[[3, 0]].to_numpy(), a[[3, 0]])
    np.testing.assert_array_equal(
        x[[True, False, True, False]].to_numpy(), a[[True, False, True, False]]
    )
    np.testing.assert_array_equal(x[1, [2, 0]].to_numpy(), a[1, [2, 0]])
    assert x[[]].shape == (0, 3, 2)


def test_mask_indexing_of_autodiff_tensor_keeps_context(device: em.Device) -> None:
    x = em.tensor([[1.0, -2.0], [3.0, -4.0]], device=device.autodiff()).require_grad()
    y = x[x > 0]
    assert y.is_tracked() and y.tolist() == [1.0, 3.0]
    g = x.grad((y * y).sum().backward())
    assert g is not None and g.tolist() == [[2.0, 0.0], [6.0, 0.0]]


def test_advanced_indexing_under_balanced_equals_disabled(device: em.Device) -> None:
    rng = np.random.default_rng(10)
    a = rng.normal(size=(4, 5))
    idx = np.array([3, 1, 3], dtype=i64)
    result = []
    for dev in (device.autodiff(), device.autodiff().gradient_checkpointing()):
        x = em.tensor(a, device=dev, dtype="float64").require_grad()
        y = (x * 2.0).exp()[em.tensor(idx, device=device), 1:].flip(1).tanh()
        g = x.grad(y.sum().backward())
        assert g is not None
        result.append(g.to_numpy())
    np.testing.assert_array_equal(result[0], result[1])


# ---------------------------------------------------------------- errors
def test_out_of_range_indices_raise_shape_error(device: em.Device) -> None:
    x = em.Tensor.zeros((3, 4), device=device)
    with pytest.raises(em.ShapeError, match=r"gather: index 4 .* dim 1 of size 4"):
        x.gather(1, em.tensor([[0, 4]] * 3, device=device))
    with pytest.raises(em.ShapeError, match=r"gather: index -1 .* dim 0 of size 3"):
        x.gather(0, em.tensor([[-1, 0, 0, 0]], device=device))
    with pytest.raises(em.ShapeError, match=r"select: index 3 .* dim 0 of size 3"):
        x.select(0, em.tensor([0, 3], device=device))
    with pytest.raises(em.ShapeError, match=r"scatter: index 7 .* dim 1 of size 4"):
        x.scatter(1, em.tensor([[7]], device=device), em.tensor([[1.0]], device=device))
    with pytest.raises(em.ShapeError, match=r"index: index 3 .* dim 0 of size 3"):
        x[em.tensor([3], device=device)]
    with pytest.raises(em.ShapeError, match=r"index: index -5 .* dim 1 of size 4"):
        x[:, [-5]]


def test_non_int_indices_raise_dtype_error(device: em.Device) -> None:
    x = em.Tensor.zeros((3, 4), device=device)
    f = em.tensor([0.0, 1.0], device=device)
    with pytest.raises(
        em.DTypeError, match="select: expected an int tensor of indices, got float32"
    ):
        x.select(0, f)
    with pytest.raises(em.DTypeError, match="gather: expected an int tensor"):
        x.gather(0, f.reshape((1, 2)))
    with pytest.raises(em.DTypeError, match="scatter: expected an int tensor"):
        x.scatter(0, f.reshape((1, 2)), f.reshape((1, 2)))
    with pytest.raises(em.DTypeError, match="index: expected int or bool index tensors"):
        x[f]
    with pytest.raises(em.DTypeError, match="index: expected a list of ints"):
        x[[0.5, 1.0]]
    with pytest.raises(em.DTypeError, match="select: expected an int tensor"):
        x.select(0, [0, 1])  # type: ignore[arg-type]


def test_wrong_ranks_and_shapes_raise_shape_error(device: em.Device) -> None:
    x = em.Tensor.zeros((3, 4), device=device)
    i = em.tensor([[0, 1]], device=device)
    with pytest.raises(em.ShapeError, match="select: expected 1-D indices"):
        x.select(0, i)
    with pytest.raises(em.ShapeError, match="gather: expected indices of the same rank"):
        x.gather(0, em.tensor([0, 1], device=device))
    with pytest.raises(em.ShapeError, match=r"gather: indices .* larger than the tensor"):
        x.gather(1, em.Tensor.zeros((4, 2), device=device, dtype=em.int64))
    with pytest.raises(em.ShapeError, match="scatter: expected values of the indices' shape"):
        x.scatter(1, i, em.Tensor.zeros((1, 3), device=device))
    with pytest.raises(em.ShapeError, match="dim 2 is out of range"):
        x.select(2, em.tensor([0], device=device))
    with pytest.raises(em.ShapeError, match="slice_assign: values of shape"):
        x.slice_assign([slice(0, 2)], em.Tensor.zeros((3, 4), device=device))
    with pytest.raises(em.DTypeError, match="slice_assign: expected slices or ints"):
        x.slice_assign([None], em.Tensor.zeros((1,), device=device))
    with pytest.raises(em.ShapeError, match="index: bool mask of shape"):
        x[em.Tensor.zeros((4, 3), device=device, dtype=em.bool)]
    with pytest.raises(em.ShapeError, match="do not broadcast together"):
        x[em.tensor([0, 1], device=device), em.tensor([0, 1, 2], device=device)]
    with pytest.raises(em.ShapeError, match="the key indexes 3 dims"):
        x[0, 1, em.tensor([0], device=device)]
