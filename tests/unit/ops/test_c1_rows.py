"""The issue-3 rows (select ... round), straight from the registry: each example against its
PyTorch reference in tests/differential/refs/ops.py (values and autograd gradients), its cost
class, and Balanced recomputation equal to Disabled bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from differential.refs.ops import REFS

import ember as em
from ember._core.dispatch import apply
from ember.ops.registry import OPS, Cost, OpSpec

ROWS = [
    "select",
    "gather",
    "scatter",
    "slice_assign",
    "flip",
    "repeat_dim",
    "tril",
    "triu",
    "sort",
    "argsort",
    "var",
    "prod_dim",
    "cumsum",
    "floor",
    "ceil",
    "round",
]
MEMORY_BOUND = {"select", "slice_assign", "flip", "repeat_dim", "tril", "triu"}
MEMORY_BOUND |= {"floor", "ceil", "round", "argsort"}


def _cases(spec: OpSpec) -> list[tuple[tuple[np.ndarray, ...], dict[str, Any]]]:
    rng = np.random.default_rng(0)
    if spec.examples is not None:
        return [
            (tuple(np.asarray(a) for a in arrays), attrs) for arrays, attrs in spec.examples(rng)
        ]
    return [((rng.uniform(-3, 3, size=(3, 4)),), {}), ((rng.uniform(-3, 3, size=(2, 1, 5)),), {})]


def _em(arrays: tuple[np.ndarray, ...], device: em.Device) -> list[em.Tensor]:
    out = []
    for a in arrays:
        if a.dtype.kind == "f":
            out.append(em.tensor(a, device=device, dtype=em.float64).require_grad())
        else:
            out.append(em.tensor(a, device=device.without_autodiff()))
    return out


@pytest.mark.parametrize("name", ROWS)
def test_row_matches_torch_reference(name: str, device: em.Device) -> None:
    spec = OPS[name]
    for arrays, attrs in _cases(spec):
        xs = _em(arrays, device.autodiff())
        out = apply(spec, tuple(xs), dict(attrs))
        ts = [
            torch.from_numpy(a).requires_grad_(True) if a.dtype.kind == "f" else torch.from_numpy(a)
            for a in arrays
        ]
        want = REFS[name](*ts, **attrs)
        assert out.shape == tuple(want.shape), name
        np.testing.assert_allclose(out.to_numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
        if not spec.differentiable:
            assert not out.is_tracked()
            continue
        w = np.random.default_rng(1).normal(size=out.shape)
        grads = (out * em.tensor(w, device=device, dtype=em.float64)).sum().backward()
        (want * torch.from_numpy(w)).sum().backward()
        for x, t in zip(xs, ts):
            if not t.is_floating_point():
                assert x.grad(grads) is None
                continue
            g = x.grad(grads)
            assert g is not None
            expect = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            np.testing.assert_allclose(g.to_numpy(), expect, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", ROWS)
def test_row_cost_class(name: str) -> None:
    want = Cost.MEMORY_BOUND if name in MEMORY_BOUND else Cost.COMPUTE_BOUND
    assert OPS[name].cost is want
    assert OPS[name].examples is not None or name in {"floor", "ceil", "round"}


@pytest.mark.parametrize("name", [n for n in ROWS if OPS[n].differentiable])
def test_row_balanced_equals_disabled(name: str, device: em.Device) -> None:
    spec = OPS[name]
    for arrays, attrs in _cases(spec):
        results = []
        for dev in (device.autodiff(), device.autodiff().gradient_checkpointing()):
            xs = _em(arrays, dev)
            # memory-bound parents and children, so Balanced recomputes around the row
            ins = tuple((x * 1.5).sin() if x.dtype.is_float else x for x in xs)
            y = apply(spec, ins, dict(attrs)).exp().sum()
            g = y.backward()
            results.append([x.grad(g) for x in xs])
        for a, b in zip(*results):
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                np.testing.assert_array_equal(a.to_numpy(), b.to_numpy(), err_msg=name)
