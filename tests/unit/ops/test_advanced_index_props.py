"""Hypothesis: random keys mixing ints, slices, None, ..., int tensors and bool masks index
exactly as PyTorch does, and the gradient of ``x[key]`` equals PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import ember as em


@st.composite
def shape_and_key(draw: Any) -> tuple[tuple[int, ...], list[Any]]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    key: list[Any] = []
    axis = 0
    tensors = 0
    while axis < len(shape):
        n = shape[axis]
        kind = draw(st.sampled_from(["int", "slice", "none", "tensor", "mask", "stop"]))
        if kind == "stop":
            break
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            lo = draw(st.integers(-n, n))
            key.append(
                slice(lo, draw(st.one_of(st.none(), st.integers(-n, n))), draw(st.integers(1, 2)))
            )
        elif kind == "none":
            key.append(None)
            continue
        elif kind == "tensor":
            key.append(np.array(draw(st.lists(st.integers(-n, n - 1), max_size=3)), dtype=np.int64))
            tensors += 1
        else:
            key.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
            tensors += 1
        axis += 1
    if tensors == 0:  # make it an advanced key: the first dim-consuming entry becomes a tensor
        at = next((i for i, k in enumerate(key) if k is not None), None)
        if at is None:
            key.append(np.array([shape[0] - 1, 0], dtype=np.int64))
        else:
            key[at] = np.array([0, -1, 0], dtype=np.int64)
    return shape, key


def _count_tensor_shapes(key: list[Any]) -> list[tuple[int, ...]]:
    out = []
    for k in key:
        if isinstance(k, np.ndarray):
            out.append((int(k.sum()),) if k.dtype == bool else k.shape)
    return out


@given(shape_and_key())
def test_advanced_indexing_matches_torch(case: tuple[tuple[int, ...], list[Any]]) -> None:
    shape, key = case
    shapes = _count_tensor_shapes(key)
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return  # index tensors that don't broadcast: covered by the error tests
    a = np.random.default_rng(0).normal(size=shape)
    tx = torch.from_numpy(a).requires_grad_(True)
    tkey = tuple(torch.from_numpy(k) if isinstance(k, np.ndarray) else k for k in key)
    want = tx[tkey]
    x = em.tensor(a, device=em.Device.cpu().autodiff(), dtype=em.float64).require_grad()
    ekey = tuple(em.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
    got = x[ekey]
    assert got.shape == tuple(want.shape), (shape, key)
    np.testing.assert_array_equal(got.to_numpy(), want.detach().numpy())
    w = np.random.default_rng(1).normal(size=got.shape)
    g = x.grad((got * em.tensor(w, dtype=em.float64)).sum().backward())
    (want * torch.from_numpy(w)).sum().backward()
    expect = tx.grad.numpy() if tx.grad is not None else np.zeros(shape)
    np.testing.assert_allclose(
        np.zeros(shape) if g is None else g.to_numpy(), expect, rtol=1e-12, atol=1e-12
    )
