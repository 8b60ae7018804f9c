"""flip, repeat_dim, tril/triu, one_hot, narrow, chunk and split against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

from .opcheck import check_forward, check_grads


@pytest.mark.parametrize(
    ("shape", "dims"),
    [((3, 4), [1]), ((2, 3, 4), [0, -1]), ((2, 3, 4), [2, 1, 0]), ((1, 4), [0]), ((0, 3), [0, 1])],
)
def test_flip(device: em.Device, shape: tuple[int, ...], dims: list[int]) -> None:
    a = np.random.default_rng(0).normal(size=shape)
    check_forward(lambda x: x.flip(dims), lambda x: x.flip(dims), [a], device)
    check_grads(lambda x: x.flip(dims), lambda x: x.flip(dims), [a], device)


def test_flip_non_contiguous_and_empty_dims(device: em.Device) -> None:
    a = np.random.default_rng(1).normal(size=(3, 4))
    check_grads(lambda x: x.transpose().flip(0), lambda x: x.T.flip(0), [a], device)
    x = em.tensor(a, device=device)
    assert x.flip([]) is x
    with pytest.raises(em.ShapeError, match="repeat an axis"):
        x.flip([0, -2])


@pytest.mark.parametrize(
    ("shape", "dim", "times"),
    [((2, 3), 0, 3), ((2, 1, 3), 1, 4), ((2, 3), -1, 2), ((2, 3), 1, 0), ((0, 2), 0, 3)],
)
def test_repeat_dim(device: em.Device, shape: tuple[int, ...], dim: int, times: int) -> None:
    a = np.random.default_rng(2).normal(size=shape)
    reps = [1] * len(shape)
    reps[dim] = times

    check_forward(lambda x: x.repeat_dim(dim, times), lambda x: x.repeat(reps), [a], device)
    check_grads(lambda x: x.repeat_dim(dim, times), lambda x: x.repeat(reps), [a], device)


def test_repeat_dim_errors(device: em.Device) -> None:
    x = em.Tensor.zeros((2, 3), device=device)
    assert x.repeat_dim(0, 1) is x
    with pytest.raises(em.ShapeError, match="repeat_dim: expected times >= 0, got -1"):
        x.repeat_dim(0, -1)
    with pytest.raises(em.DTypeError, match="repeat_dim: expected an int times"):
        x.repeat_dim(0, 2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize(
    ("shape", "diagonal"), [((4, 4), 0), ((3, 5), 1), ((2, 4, 3), -1), ((3, 3), 5), ((0, 2), 0)]
)
def test_tril_triu(device: em.Device, op: str, shape: tuple[int, ...], diagonal: int) -> None:
    a = np.random.default_rng(3).normal(size=shape)

    def f(x: em.Tensor) -> em.Tensor:
        return getattr(x, op)(diagonal)

    def ref(x: torch.Tensor) -> torch.Tensor:
        return getattr(torch, op)(x, diagonal)

    check_forward(f, ref, [a], device)
    check_grads(f, ref, [a], device)
    check_grads(lambda x: f(x.transpose()), lambda x: ref(x.mT), [a], device)


def test_tril_needs_a_matrix(device: em.Device) -> None:
    with pytest.raises(em.ShapeError, match="tril: expected a tensor of rank >= 2"):
        em.Tensor.zeros((3,), device=device).tril()


@pytest.mark.parametrize("shape", [(5,), (2, 3), (0,), (2, 0)])
def test_one_hot_matches_torch(device: em.Device, shape: tuple[int, ...]) -> None:
    labels = np.random.default_rng(4).integers(0, 4, size=shape).astype(np.int64)
    got = check_forward(
        lambda y: y.one_hot(4), lambda y: torch.nn.functional.one_hot(y, 4), [labels], device
    )
    assert got.dtype is em.int64
    assert em.tensor([1, 0], device=device, dtype=em.int32).one_hot(2).dtype is em.int32
    assert em.tensor(2, device=device).one_hot(3).tolist() == [0, 0, 1]  # 0-d -> (n,)


def test_one_hot_errors(device: em.Device) -> None:
    with pytest.raises(em.ShapeError, match=r"one_hot: index 3 .* size 3"):
        em.tensor([0, 3], device=device).one_hot(3)
    with pytest.raises(em.ShapeError, match="one_hot: index -1"):
        em.tensor([-1], device=device).one_hot(3)
    with pytest.raises(em.DTypeError, match="one_hot: expected int class indices, got float32"):
        em.tensor([0.0, 1.0], device=device).one_hot(3)


@pytest.mark.parametrize(
    ("shape", "dim", "start", "length"),
    [((5, 3), 0, 1, 3), ((2, 6), -1, 4, 2), ((4, 3), 0, -2, 2), ((4, 3), 1, 3, 0)],
)
def test_narrow(
    device: em.Device, shape: tuple[int, ...], dim: int, start: int, length: int
) -> None:
    a = np.random.default_rng(5).normal(size=shape)
    check_forward(
        lambda x: x.narrow(dim, start, length), lambda x: x.narrow(dim, start, length), [a], device
    )
    check_grads(
        lambda x: x.narrow(dim, start, length), lambda x: x.narrow(dim, start, length), [a], device
    )


def test_narrow_errors(device: em.Device) -> None:
    x = em.Tensor.zeros((4, 3), device=device)
    with pytest.raises(em.ShapeError, match="narrow: start 3 \\+ length 2 exceeds size 4 of dim 0"):
        x.narrow(0, 3, 2)
    with pytest.raises(em.ShapeError, match="narrow: expected start >= -4, got -5"):
        x.narrow(0, -5, 1)


@pytest.mark.parametrize(("size", "chunks"), [(5, 3), (6, 4), (2, 4), (6, 3), (1, 1), (0, 3)])
def test_chunk_matches_torch(device: em.Device, size: int, chunks: int) -> None:
    a = np.random.default_rng(6).normal(size=(2, size))
    x = em.tensor(a, device=device)
    got = x.chunk(chunks, -1)
    want = torch.from_numpy(a).chunk(chunks, -1)
    assert [g.shape for g in got] == [tuple(w.shape) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.to_numpy(), w.numpy())


@pytest.mark.parametrize(("size", "split"), [(5, 2), (6, 3), (2, 4), (0, 2)])
def test_split_matches_torch(device: em.Device, size: int, split: int) -> None:
    a = np.random.default_rng(7).normal(size=(size, 2))
    got = em.tensor(a, device=device).split(split, 0)
    want = torch.from_numpy(a).split(split, 0)
    assert [g.shape for g in got] == [tuple(w.shape) for w in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.to_numpy(), w.numpy())


def test_chunk_and_split_gradients(device: em.Device) -> None:
    a = np.random.default_rng(8).normal(size=(3, 7))

    def f(x: em.Tensor) -> em.Tensor:
        p = x.chunk(3, 1)
        q = x.split(4, 1)
        return em.Tensor.cat([p[2] * 2.0, q[0], p[0].exp()], 1)

    def ref(x: torch.Tensor) -> torch.Tensor:
        p = x.chunk(3, 1)
        q = x.split(4, 1)
        return torch.cat([p[2] * 2.0, q[0], p[0].exp()], 1)

    check_grads(f, ref, [a], device)
    with pytest.raises(em.ShapeError, match="chunk: expected chunks >= 1, got 0"):
        em.tensor(a, device=device).chunk(0)
    with pytest.raises(em.ShapeError, match="split: expected split_size >= 1, got 0"):
        em.tensor(a, device=device).split(0)
