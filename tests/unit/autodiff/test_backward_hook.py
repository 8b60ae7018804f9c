"""``ember.autodiff.backward(loss, on_leaf=...)``: the backward entry point and its leaf hook."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember._core.internal import leaf_id

Strategy = em.GradientCheckpointingStrategy


def _leaf(device: em.Device, data: list[float], strategy: Strategy) -> em.Tensor:
    t = em.Tensor.from_data(data, device=device.autodiff(), dtype=em.float64)
    return t.with_gradient_checkpointing_strategy(strategy).require_grad()


def _net(device: em.Device, strategy: Strategy) -> tuple[em.Tensor, em.Tensor, em.Tensor]:
    """w1 feeds the loss through three ops, w2 through one: w2 completes first."""
    w1 = _leaf(device, [0.5, -1.0, 2.0], strategy)
    w2 = _leaf(device, [1.5, 0.25, -0.75], strategy)
    loss = ((w1 * 3.0).exp() * w2).sum()
    return w1, w2, loss


def test_autodiff_exports_backward() -> None:
    assert em.autodiff.__all__ == ["Function", "FunctionCtx", "backward", "grad", "hvp", "vjp"]
    assert em.autodiff.backward is em.autodiff.backprop.backward


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_backward_equals_tensor_backward(device: em.Device, strategy: Strategy) -> None:
    w1, w2, loss = _net(device, strategy)
    got = em.autodiff.backward(loss)
    v1, v2, again = _net(device, strategy)
    want = again.backward()
    for a, b in ((w1, v1), (w2, v2)):
        ga, gb = a.grad(got), b.grad(want)
        assert ga is not None and gb is not None
        np.testing.assert_array_equal(ga.to_numpy(), gb.to_numpy())
    assert len(got) == len(want) == 2


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_on_leaf_reports_each_leaf_once_as_it_completes(
    device: em.Device, strategy: Strategy
) -> None:
    w1, w2, loss = _net(device, strategy)
    frozen = em.Tensor.from_data([1.0, 2.0, 3.0], device=device.autodiff(), dtype=em.float64)
    frozen = frozen.with_gradient_checkpointing_strategy(strategy)
    loss = loss + (frozen * w2).sum()  # an untracked operand: never reported
    seen: list[tuple[int, Any]] = []
    grads = em.autodiff.backward(loss, on_leaf=lambda i, g: seen.append((i, g)))
    assert [i for i, _ in seen] == [leaf_id(w2), leaf_id(w1)]  # the shallow leaf first
    for i, g in seen:
        assert grads.get(i) is g  # the array the container keeps, handed over as is
    g2 = w2.grad(grads)
    assert g2 is not None
    np.testing.assert_allclose(
        g2.to_numpy(), np.exp(3.0 * w1.to_numpy()) + frozen.to_numpy(), rtol=1e-12
    )


def test_leaf_id_is_none_but_for_require_grad_leaves(device: em.Device) -> None:
    x = em.Tensor.ones((2,), device=device.autodiff())
    assert leaf_id(x) is None and leaf_id(x.without_autodiff()) is None
    w = x.require_grad()
    assert isinstance(leaf_id(w), int)
    assert leaf_id(w * 2.0) is None  # a tracked non-leaf has no gradient entry


def test_a_hook_error_propagates_and_consumes_the_graph(device: em.Device) -> None:
    _, _, loss = _net(device, Strategy.Disabled)

    def fail(i: int, g: Any) -> None:
        raise RuntimeError("hook failed")

    with pytest.raises(RuntimeError, match="hook failed"):
        em.autodiff.backward(loss, on_leaf=fail)
    with pytest.raises(em.AutodiffError, match="already consumed"):
        em.autodiff.backward(loss)


def test_bad_arguments_raise_ember_errors(device: em.Device) -> None:
    w = _leaf(device, [1.0, 2.0], Strategy.Disabled)
    with pytest.raises(em.DTypeError, match=r"backward: expected an em.Tensor loss, got list"):
        em.autodiff.backward([w])  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match=r"backward: expected on_leaf to be a callable"):
        em.autodiff.backward(w.sum(), on_leaf=3)  # type: ignore[arg-type]
    with pytest.raises(em.AutodiffError, match=r"backward: expected a tracked tensor.*plain"):
        em.autodiff.backward(w.without_autodiff().sum())
    with pytest.raises(em.AutodiffError, match=r"untracked autodiff tensor"):
        em.autodiff.backward(w.detach().set_require_grad(False).sum())
