"""Cross-entropy on float16/bfloat16 logits: the rows read them directly and compute in float32.

Under ``autocast`` the loss is float32 and no float32 copy of the logits enters the graph;
outside it the loss keeps the logits' dtype. Gradients come back in the logits' dtype. Runs on
every backend (this package's conftest).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ember as em
from ember import amp
from ember.autodiff.node import Node
from ember.nn import functional as F

from .compare import dev

BF16 = np.dtype(ml_dtypes.bfloat16)
CASES = [
    {},
    {"ignore_index": 2},
    {"label_smoothing": 0.1},
    {"ignore_index": 1, "label_smoothing": 0.3},
]


def _logits(rng: np.random.Generator, r: int, c: int, low: em.DType) -> tuple[em.Tensor, Any]:
    """(R, C) require-grad logits of dtype ``low`` and the same values in float32."""
    x = rng.normal(size=(r, c)) * 3
    t = em.tensor(x, device=dev(), dtype=low).require_grad()
    return t, t.to_numpy().astype(np.float32)


def _reference(x32: np.ndarray, y: np.ndarray, **kw: Any) -> tuple[em.Tensor, np.ndarray]:
    """The float32 loss (reduction "none") and its gradient for ``sum(loss)`` on ``x32``."""
    x = em.tensor(x32, device=dev(), dtype=em.float32).require_grad()
    loss = F.cross_entropy(x, em.tensor(y, device=dev()), reduction="none", **kw)
    g = x.grad(loss.sum().backward())
    assert g is not None
    return loss, g.to_numpy()


def _node_named(root: Node, name: str) -> Node:
    stack, seen = [root], set()
    while stack:
        n = stack.pop()
        if n.spec is not None and n.spec.name == name:
            return n
        seen.add(n.id)
        stack.extend(p for p in n.parents if p is not None and p.id not in seen)
    raise AssertionError(f"no {name} node in the graph")


@pytest.mark.parametrize("low", [em.bfloat16, em.float16])
@pytest.mark.parametrize("kw", CASES, ids=str)
def test_half_logits_compute_in_float32(
    low: em.DType, kw: dict[str, Any], rng: np.random.Generator
) -> None:
    r, c = 24, 37
    x, x32 = _logits(rng, r, c, low)
    y = rng.integers(0, c, size=(r,))
    if "ignore_index" in kw:
        y[::5] = kw["ignore_index"]
    target = em.tensor(y, device=dev())
    ref, ref_grad = _reference(x32, y, **kw)
    with amp.autocast(low):
        loss = F.cross_entropy(x, target, reduction="none", **kw)
    assert loss.dtype is em.float32  # losses are float32 under autocast
    # the same rounded logits in float32: only the float32 kernel's rounding differs
    np.testing.assert_allclose(loss.to_numpy(), ref.to_numpy(), rtol=1e-5, atol=1e-5)
    if "ignore_index" in kw:
        ignored = y == kw["ignore_index"]
        assert (loss.to_numpy()[ignored] == 0).all()
    g = x.grad(loss.sum().backward())
    assert g is not None and g.dtype is low
    # softmax and the result are each rounded to the logits' dtype: a few units in the last place
    # of softmax (the target's entry, softmax - 1, cancels) and of the result
    tol = 2.0**-7 if low is em.bfloat16 else 2.0**-9
    soft = np.exp(x32 - x32.max(1, keepdims=True))
    soft /= soft.sum(1, keepdims=True)
    if "ignore_index" in kw:
        soft[y == kw["ignore_index"]] = 0.0
    err = np.abs(g.to_numpy().astype(np.float32) - ref_grad)
    assert (err <= tol * (np.abs(ref_grad) + soft) + 1e-7).all(), err.max()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_dtype_inside_and_outside_autocast(reduction: str, rng: np.random.Generator) -> None:
    x, x32 = _logits(rng, 16, 9, em.bfloat16)
    y = rng.integers(0, 9, size=(16,))
    target = em.tensor(y, device=dev())
    kw: dict[str, Any] = {"reduction": reduction, "ignore_index": 4, "label_smoothing": 0.05}
    with amp.autocast(em.bfloat16):
        inside = F.cross_entropy(x, target, **kw)
    outside = F.cross_entropy(x, target, **kw)
    assert inside.dtype is em.float32
    assert outside.dtype is em.bfloat16  # without a policy the dtype a user sees is unchanged
    # the same float32 computation, rounded once at the end
    want = inside.to_numpy().astype(BF16)
    np.testing.assert_array_equal(outside.to_numpy(), want)
    ref = F.cross_entropy(em.tensor(x32, device=dev(), dtype=em.float32), target, **kw)
    np.testing.assert_allclose(inside.to_numpy(), ref.to_numpy(), rtol=1e-5, atol=1e-6)
    for loss in (inside, outside):
        g = x.grad(loss.sum().backward())
        assert g is not None and g.dtype is em.bfloat16


def test_no_cast_between_logits_and_cross_entropy(rng: np.random.Generator) -> None:
    d = dev()
    h = em.tensor(rng.normal(size=(8, 16)), device=d, dtype=em.float32)
    w = em.tensor(rng.normal(size=(12, 16)) * 0.3, device=d, dtype=em.float32).require_grad()
    target = em.tensor(rng.integers(0, 12, size=(8,)), device=d)
    with amp.autocast(em.bfloat16):
        logits = F.linear(h, w)
        loss = F.cross_entropy(logits, target)
    assert logits.dtype is em.bfloat16 and loss.dtype is em.float32
    assert loss._node is not None
    ce = _node_named(loss._node, "cross_entropy")
    parent = ce.parents[0]
    assert parent is not None and parent.spec is not None
    assert parent.spec.name == "linear"  # the bfloat16 logits themselves, no cast node
    # the node keeps the bfloat16 logits for its backward, not a float32 copy
    assert ce.inputs is not None
    kept = ce.inputs[0]
    assert kept is logits._data
    if d.backend_name == "torch":
        assert kept.dtype == logits._data.dtype and kept.data_ptr() == logits._data.data_ptr()
    gw = w.grad(loss.backward())
    assert gw is not None and gw.dtype is em.float32


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_probability_targets_in_bfloat16(smoothing: float, rng: np.random.Generator) -> None:
    x, x32 = _logits(rng, 10, 7, em.bfloat16)
    p = rng.uniform(size=(10, 7))
    p /= p.sum(axis=1, keepdims=True)
    p16 = em.tensor(p, device=dev(), dtype=em.bfloat16)
    p32 = em.tensor(p16.to_numpy().astype(np.float32), device=dev(), dtype=em.float32)
    xr = em.tensor(x32, device=dev(), dtype=em.float32).require_grad()
    ref = F.cross_entropy(xr, p32, label_smoothing=smoothing)
    ref_grad = xr.grad(ref.backward())
    assert ref_grad is not None
    with amp.autocast(em.bfloat16):
        loss = F.cross_entropy(x, p16, label_smoothing=smoothing)
    assert loss.dtype is em.float32
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-5)
    assert _node_named(loss._node, "cross_entropy_soft").parents[0] is x._node  # no cast
    g = x.grad(loss.backward())
    assert g is not None and g.dtype is em.bfloat16
    np.testing.assert_allclose(
        g.to_numpy().astype(np.float32), ref_grad.to_numpy(), rtol=2.0**-7, atol=1e-4
    )
    assert F.cross_entropy(x, p16, label_smoothing=smoothing).dtype is em.bfloat16
