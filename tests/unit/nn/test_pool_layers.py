"""nn.MaxPool1d/2d, nn.AvgPool1d/2d and nn.MaxUnpool1d/2d with issue 19's options against the
torch layers of the same arguments: outputs, indices and input gradients (float64, every
backend)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

T = torch.nn

LAYERS = [
    ("MaxPool2d", (3, 2, 1), {"ceil_mode": True}, (2, 3, 8, 7)),
    ("MaxPool2d", ((2, 3), (1, 2)), {"dilation": (2, 1), "ceil_mode": True}, (2, 2, 7, 8)),
    ("MaxPool1d", (3, 2, 1), {"ceil_mode": True, "dilation": 2}, (2, 3, 10)),
    ("AvgPool2d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}, (2, 3, 8, 7)),
    ("AvgPool2d", (2,), {"ceil_mode": True, "divisor_override": 3}, (3, 5, 5)),
    ("AvgPool1d", (4, 3, 2), {"ceil_mode": True, "count_include_pad": False}, (2, 2, 11)),
]


def _grad_pair(y: em.Tensor, ty: torch.Tensor, x: em.Tensor, tx: torch.Tensor) -> None:
    w = np.random.default_rng(5).normal(size=tuple(ty.shape))
    grads = (y * em.tensor(w, device=x.device.without_autodiff())).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    g = x.grad(grads)
    assert g is not None and tx.grad is not None
    np.testing.assert_allclose(g.to_numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "args", "kw", "shape"), LAYERS, ids=lambda v: str(v))
def test_layer_matches_torch(
    name: str, args: tuple[Any, ...], kw: dict[str, Any], shape: tuple[int, ...],
    device: em.Device, node_seed: int,
) -> None:  # fmt: skip
    a = np.random.default_rng(node_seed).normal(size=shape)
    layer, ref = getattr(nn, name)(*args, **kw), getattr(T, name)(*args, **kw)
    x = em.tensor(a, device=device.autodiff()).require_grad()
    tx = torch.tensor(a, requires_grad=True)
    y, ty = layer(x), ref(tx)
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    _grad_pair(y, ty, x, tx)
    assert "ceil_mode=True" in repr(layer)


@pytest.mark.parametrize("n", [1, 2])
def test_max_pool_indices_into_max_unpool(n: int, device: em.Device, node_seed: int) -> None:
    shape = (2, 3, 9, 7)[: n + 2]
    a = np.random.default_rng(node_seed).normal(size=shape)
    pool = getattr(nn, f"MaxPool{n}d")(2, return_indices=True, ceil_mode=False)
    unpool = getattr(nn, f"MaxUnpool{n}d")(2)
    tpool = getattr(T, f"MaxPool{n}d")(2, return_indices=True)
    tunpool = getattr(T, f"MaxUnpool{n}d")(2)
    x = em.tensor(a, device=device.autodiff()).require_grad()
    tx = torch.tensor(a, requires_grad=True)
    (v, idx), (tv, tidx) = pool(x), tpool(tx)
    np.testing.assert_array_equal(idx.to_numpy(), tidx.numpy())
    # the odd input sizes back, given as the full input shape
    y, ty = unpool(v, idx, output_size=shape), tunpool(tv, tidx, output_size=shape)
    assert y.shape == shape
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=0, atol=0)
    _grad_pair(y, ty, x, tx)
