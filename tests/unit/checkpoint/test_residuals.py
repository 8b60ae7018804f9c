"""Declared residuals (``Saves.RESIDUALS``): a forward's ``(out, saved)``, kept as ``ctx.saved``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember._core.dispatch import apply
from ember.autodiff.node import Node
from ember.ops.registry import OPS, Cost, OpSpec, Saves

Strategy = em.GradientCheckpointingStrategy
STRATEGIES = [Strategy.Disabled, Strategy.Balanced]


def _dev(device: em.Device, strategy: Strategy) -> em.Device:
    d = device.autodiff()
    return d.gradient_checkpointing() if strategy == Strategy.Balanced else d


def _node_named(root: Node, name: str) -> Node:
    stack, seen = [root], {root}
    while stack:
        n = stack.pop()
        if n.spec is not None and n.spec.name == name:
            return n
        for p in n.parents:
            if p is not None and p not in seen:
                seen.add(p)
                stack.append(p)
    raise AssertionError(f"no {name} node")


def _xent(dev: em.Device, rows: int = 6, classes: int = 5) -> tuple[em.Tensor, em.Tensor]:
    rng = np.random.default_rng(11)
    x = em.Tensor.from_data(rng.normal(size=(rows, classes)).astype(np.float32), device=dev)
    x = x.require_grad()
    target = em.tensor(rng.integers(0, classes, size=(rows,)), device=dev)
    return x, F.cross_entropy(x * 1.0, target, reduction="sum")


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_cross_entropy_keeps_its_logsumexp_as_a_residual(
    device: em.Device, strategy: Strategy
) -> None:
    x, loss = _xent(_dev(device, strategy))
    assert loss._node is not None
    n = _node_named(loss._node, "cross_entropy")
    assert n.output is None  # the rule reads no output: the lse is no output column any more
    lse = n.saved
    assert lse is not None and tuple(lse.shape) == (6,)
    want = np.log(np.exp(x.to_numpy()).sum(axis=1))
    np.testing.assert_allclose(n.b.to_numpy(lse), want, rtol=1e-6)
    r = em.checkpoint.report(loss)
    assert r.by_op["cross_entropy"] == 6 * 4  # the float32 residual, counted as the op's own
    assert r.total_bytes == sum(r.by_op.values())
    loss.backward()
    assert n.saved is None  # released with the step


def test_the_rule_reads_ctx_saved(device: em.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Balanced the rule gets a view whose ``saved`` is the node's residual, by identity."""
    for strategy in STRATEGIES:
        x, loss = _xent(_dev(device, strategy))
        assert loss._node is not None
        n = _node_named(loss._node, "cross_entropy")
        b = n.b
        real = type(b).cross_entropy_backward
        seen: list[Any] = []

        def spy(
            grad: Any, logits: Any, target: Any, lse: Any, *rest: Any, _k: Any = (seen, real)
        ) -> Any:
            _k[0].append(lse)
            return _k[1](grad, logits, target, lse, *rest)

        monkeypatch.setattr(type(b), "cross_entropy_backward", staticmethod(spy))
        expect = n.saved
        grads = loss.backward()
        monkeypatch.undo()
        assert len(seen) == 1 and seen[0] is expect, strategy
        assert x.grad(grads) is not None


def test_cross_entropy_balanced_equals_disabled(device: em.Device) -> None:
    got = []
    for strategy in STRATEGIES:
        x, loss = _xent(_dev(device, strategy))
        g = x.grad(loss.backward())
        assert g is not None
        got.append(g.to_numpy())
    np.testing.assert_array_equal(got[0], got[1])


def _square_row() -> OpSpec:
    """A memory-bound row whose forward returns (x * x, 2 x) and whose rule reads the 2 x."""
    return OpSpec(
        "_test_square_with_residual",
        1,
        lambda ctx, grad: (grad * ctx.saved,),
        Cost.MEMORY_BOUND,
        Saves.RESIDUALS,
        forward=lambda b, x: (b.mul(x, x), b.mul_scalar(x, 2.0)),
    )


def test_a_recipe_row_keeps_its_residual(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Balanced the row is a recipe: its output is recomputed, its residual kept."""
    spec = _square_row()
    monkeypatch.setitem(OPS, spec.name, spec)
    got = []
    for strategy in STRATEGIES:
        dev = _dev(device, strategy)
        x = em.Tensor.from_data(np.linspace(-1, 1, 8, dtype=np.float32), device=dev)
        x = x.require_grad()
        y = apply(spec, (x * 1.0,), {})
        np.testing.assert_array_equal(y.to_numpy(), (x * x).to_numpy())  # callers see out only
        assert y._node is not None
        assert y._node.recipe == (strategy == Strategy.Balanced)
        assert y._node.saved is not None
        loss = (y * y).sum()  # the mul reads y: recomputed under Balanced
        r = em.checkpoint.report(loss)
        assert r.by_op[spec.name] >= 8 * 4  # the residual (and, Disabled, y kept by the mul)
        grads = loss.backward()
        if strategy == Strategy.Balanced:
            assert grads.recomputed  # the recipe's output was recomputed, not its residual
        g = x.grad(grads)
        assert g is not None
        got.append(g.to_numpy())
    np.testing.assert_array_equal(got[0], got[1])
    xs = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(got[0], 4 * xs**3, rtol=1e-6)
