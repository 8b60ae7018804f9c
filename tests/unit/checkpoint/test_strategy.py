"""The strategy protocol: a new checkpointing strategy is one class (SEMANTICS.md §7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers.sampling import run_row, runtime_attrs, sample_cases, to_tensors

import ember as em
import ember.nn.functional as F
from ember.autodiff.node import Node
from ember.checkpoint import strategy as strategy_module
from ember.ops.registry import OPS, OpSpec

Strategy = em.GradientCheckpointingStrategy
DIFFERENTIABLE = [s for s in OPS.values() if s.differentiable]


class KeepAll(Strategy):
    """Goes through the recipe path (``recipes`` stays True) but never makes a recipe."""

    __slots__ = ()
    name = "KeepAll"

    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        return True


class RecomputeMemoryBound(Strategy):
    """Balanced written as a user would: a recipe for every memory-bound op."""

    __slots__ = ()
    name = "RecomputeMemoryBound"

    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        return not spec.memory_bound


class RecomputeNamed(Strategy):
    """A strategy with a parameter: recipes for the named ops only."""

    __slots__ = ("names",)
    name = "RecomputeNamed"

    def __init__(self, *names: str) -> None:
        self.names = frozenset(names)

    def keeps(self, spec: OpSpec, parents: tuple[Node | None, ...]) -> bool:
        return spec.name not in self.names

    def _key(self) -> tuple[Any, ...]:
        return (self.names,)


Build = Callable[[Callable[[np.ndarray], em.Tensor]], tuple[em.Tensor, list[em.Tensor]]]


def _run(device: em.Device, strategy: Strategy, build: Build) -> tuple[list[np.ndarray], Any]:
    dev = device.autodiff()

    def leaf(a: np.ndarray) -> em.Tensor:
        t = em.Tensor.from_data(a, device=dev).require_grad()
        return t.with_gradient_checkpointing_strategy(strategy)

    loss, leaves = build(leaf)
    report = em.checkpoint.report(loss)
    grads = loss.backward()
    out = []
    for t in leaves:
        g = t.grad(grads)
        assert g is not None
        out.append(g.to_numpy())
    return out, (report, grads.recomputed)


def _mlp(leaf: Callable[[np.ndarray], em.Tensor]) -> tuple[em.Tensor, list[em.Tensor]]:
    rng = np.random.default_rng(3)
    x = leaf(rng.normal(size=(8, 16)).astype(np.float32))
    w1 = leaf((rng.normal(size=(16, 32)) * 0.3).astype(np.float32))
    w2 = leaf((rng.normal(size=(32, 4)) * 0.3).astype(np.float32))
    h = ((x @ w1) * 0.5).tanh().exp() - 1.0
    h = h.abs() + h.sin() * 0.1
    y = F.softmax(h @ w2, 1)
    return (y * y).mean() + (h.sum() * 1e-3), [x, w1, w2]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)  # bit for bit: same backend, same dtype


def test_keep_all_equals_disabled(device: em.Device) -> None:
    ref, (r_ref, _) = _run(device, Strategy.Disabled, _mlp)
    got, (r_got, counts) = _run(device, KeepAll(), _mlp)
    _same(ref, got)
    assert counts == {} and r_got.num_recipes == 0
    assert r_got.num_nodes == r_ref.num_nodes


def test_recompute_memory_bound_equals_balanced(device: em.Device) -> None:
    ref, _ = _run(device, Strategy.Disabled, _mlp)
    bal, (r_bal, c_bal) = _run(device, Strategy.Balanced, _mlp)
    got, (r_got, c_got) = _run(device, RecomputeMemoryBound(), _mlp)
    _same(ref, got)
    _same(bal, got)
    assert r_got == r_bal  # same bytes per op, same node and recipe counts
    assert r_got.num_recipes > 0
    assert sorted(c_got.values()) == sorted(c_bal.values())


def test_a_parameterised_strategy_recomputes_only_what_it_names(device: em.Device) -> None:
    ref, _ = _run(device, Strategy.Disabled, _mlp)
    got, (report, counts) = _run(device, RecomputeNamed("exp", "tanh"), _mlp)
    _same(ref, got)
    assert report.num_recipes == 2 and sorted(counts.values()) == [1, 1]


@pytest.mark.parametrize("spec", DIFFERENTIABLE, ids=lambda s: s.name)
def test_every_row_under_custom_strategies(device: em.Device, spec: OpSpec) -> None:
    """Each differentiable row, between recipes, gives Disabled's gradients under both classes."""
    rng = np.random.default_rng(0)
    for arrays, attrs in sample_cases(spec, rng)[:2]:
        arrays = tuple(np.array(a, np.float64) if a.dtype.kind == "f" else a for a in arrays)
        results = []
        for strategy in (Strategy.Disabled, KeepAll(), RecomputeMemoryBound()):
            dev = device.autodiff()
            leaves = [
                t.with_gradient_checkpointing_strategy(strategy)
                for t in to_tensors(arrays, dev, require_grad=True)
            ]
            ins = [(t * 1.0) + 0.0 if t.is_tracked() else t for t in leaves]
            out = run_row(spec, ins, runtime_attrs(spec, attrs, dev))
            if not out.is_tracked():
                break
            grads = ((out * 1.0) * 0.75).sum().backward()
            results.append([g.to_numpy() for t in leaves if (g := t.grad(grads)) is not None])
        for got in results[1:]:
            _same(results[0], got)


def test_strategies_compare_by_value() -> None:
    assert KeepAll() == KeepAll() and hash(KeepAll()) == hash(KeepAll())
    assert KeepAll() != RecomputeMemoryBound()
    assert RecomputeMemoryBound() != Strategy.Balanced  # same decisions, another class
    assert RecomputeNamed("exp") == RecomputeNamed("exp")
    assert RecomputeNamed("exp") != RecomputeNamed("tanh")
    assert len({Strategy.Balanced, Strategy.Balanced, Strategy.Disabled}) == 2
    assert type(Strategy.Balanced)() == Strategy.Balanced  # another instance, the same value
    assert list(Strategy) == [Strategy.Disabled, Strategy.Balanced]
    assert isinstance(Strategy.Balanced, Strategy) and isinstance(KeepAll(), Strategy)


def test_repr_and_name() -> None:
    assert repr(Strategy.Disabled) == "GradientCheckpointingStrategy.Disabled"
    assert repr(Strategy.Balanced) == "GradientCheckpointingStrategy.Balanced"
    assert Strategy.Balanced.name == "Balanced"
    assert repr(KeepAll()) == "KeepAll()"
    assert repr(RecomputeNamed("exp")) == "RecomputeNamed(frozenset({'exp'}))"


def test_equal_strategies_mix_as_operands(device: em.Device) -> None:
    dev = device.autodiff()
    a = em.Tensor.ones((3,), device=dev).require_grad()
    a = a.with_gradient_checkpointing_strategy(RecomputeNamed("exp"))
    c = em.Tensor.ones((3,), device=dev).with_gradient_checkpointing_strategy(RecomputeNamed("exp"))
    assert (a + c).gradient_checkpointing_strategy() == RecomputeNamed("exp")
    with pytest.raises(em.AutodiffError, match="different checkpointing strategies"):
        a + c.with_gradient_checkpointing_strategy(RecomputeNamed("tanh"))


def test_the_protocol_needs_keeps() -> None:
    class Missing(Strategy):
        __slots__ = ()

    with pytest.raises(TypeError, match="keeps"):
        Missing()  # type: ignore[abstract]


def test_disabled_is_never_asked(device: em.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Disabled record path reads ``recipes`` only: no ``keeps`` call per op."""

    def fail(self: Any, spec: OpSpec, parents: Any) -> bool:
        raise AssertionError(f"keeps called for {spec.name}")

    monkeypatch.setattr(strategy_module._Disabled, "keeps", fail)
    x = em.Tensor.ones((4,), device=device.autodiff()).require_grad()
    grads = (x.exp() * 2.0).sum().backward()
    g = x.grad(grads)
    assert g is not None
    np.testing.assert_allclose(g.to_numpy(), 2.0 * np.e, rtol=1e-6)
