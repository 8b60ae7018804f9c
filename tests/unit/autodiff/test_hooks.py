"""``Tensor.register_hook``: gradients seen and replaced as PyTorch's tensor hooks do."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")
Strategy = em.GradientCheckpointingStrategy
TOL = {"rtol": 1e-12, "atol": 1e-12}


def _pair(device: em.Device, seed: int, strategy: Strategy) -> tuple[em.Tensor, Any, np.ndarray]:
    a = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(3, 4))
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64)
    return x.with_gradient_checkpointing_strategy(strategy).require_grad(), _t(a), a


def _t(a: np.ndarray) -> Any:
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def _close(got: em.Tensor | None, want: Any) -> None:
    assert got is not None
    np.testing.assert_allclose(got.to_numpy(), want.detach().numpy(), **TOL)


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_hooks_on_leaf_and_intermediate_match_torch(
    device: em.Device, node_seed: int, strategy: Strategy
) -> None:
    x, tx, _ = _pair(device, node_seed, strategy)
    seen: list[np.ndarray] = []
    tseen: list[np.ndarray] = []
    h = x.exp()
    th = tx.exp()
    h.register_hook(lambda g: seen.append(g.to_numpy()) or g * 3.0)  # type: ignore[func-returns-value]
    th.register_hook(lambda g: tseen.append(g.detach().numpy().copy()) or g * 3.0)
    x.register_hook(lambda g: g.clamp(-2.0, 2.0))
    tx.register_hook(lambda g: g.clamp(-2.0, 2.0))
    grads = ((h * h).sum() + (x * 0.5).sum()).backward()
    ((th * th).sum() + (tx * 0.5).sum()).backward()
    np.testing.assert_allclose(seen[0], tseen[0], **TOL)
    _close(x.grad(grads), tx.grad)


def test_hook_returning_none_keeps_and_order(device: em.Device, node_seed: int) -> None:
    x, tx, _ = _pair(device, node_seed, Strategy.Disabled)
    calls: list[str] = []
    x.register_hook(lambda g: calls.append("first") or None)  # type: ignore[func-returns-value]
    x.register_hook(lambda g: calls.append("second") or g + 1.0)  # type: ignore[func-returns-value]
    x.register_hook(lambda g: calls.append("third") or g * 2.0)  # type: ignore[func-returns-value]
    tx.register_hook(lambda g: None)
    tx.register_hook(lambda g: g + 1.0)
    tx.register_hook(lambda g: g * 2.0)
    grads = (x * x).sum().backward()
    (tx * tx).sum().backward()
    assert calls == ["first", "second", "third"]
    _close(x.grad(grads), tx.grad)


def test_handle_remove(device: em.Device) -> None:
    x = em.Tensor.ones((2,), device=device.autodiff(), dtype=em.float64).require_grad()
    handle = x.register_hook(lambda g: g * 10.0)
    assert x.grad(x.sum().backward()).tolist() == [10.0, 10.0]  # type: ignore[union-attr]
    handle.remove()
    handle.remove()  # idempotent
    assert x.grad(x.sum().backward()).tolist() == [1.0, 1.0]  # type: ignore[union-attr]
    with x.register_hook(lambda g: g * 0.0):
        assert x.grad(x.sum().backward()).tolist() == [0.0, 0.0]  # type: ignore[union-attr]
    assert x.grad(x.sum().backward()).tolist() == [1.0, 1.0]  # type: ignore[union-attr]


def test_hook_on_the_loss_sees_the_seed(device: em.Device) -> None:
    x = em.Tensor.from_data([1.0, 2.0], device=device.autodiff(), dtype=em.float64)
    x = x.require_grad()
    loss = (x * x).sum()
    seen: list[float] = []
    loss.register_hook(lambda g: seen.append(g.item()) or g * 0.5)  # type: ignore[func-returns-value]
    grads = loss.backward()
    assert seen == [1.0]
    assert x.grad(grads).tolist() == [1.0, 2.0]  # type: ignore[union-attr]


def test_hooks_under_create_graph_match_torch(device: em.Device, node_seed: int) -> None:
    x, tx, _ = _pair(device, node_seed, Strategy.Disabled)
    h, th = x.sin(), tx.sin()
    h.register_hook(lambda g: g * h)
    th.register_hook(lambda g: g * th)
    gx = x.grad((h * h).sum().backward(create_graph=True))
    (tg,) = torch.autograd.grad((th * th).sum(), tx, create_graph=True)
    _close(gx, tg)
    assert gx is not None
    second = x.grad(gx.sum().backward())
    tg.sum().backward()
    _close(second, tx.grad)


def test_hook_errors(device: em.Device) -> None:
    plain = em.Tensor.ones((2,), device=device)
    with pytest.raises(em.AutodiffError, match="register_hook: expected a tracked tensor"):
        plain.register_hook(lambda g: g)
    with pytest.raises(em.AutodiffError, match="untracked autodiff tensor"):
        plain.autodiff().register_hook(lambda g: g)
    x = em.Tensor.ones((2,), device=device.autodiff()).require_grad()
    with pytest.raises(em.DTypeError, match="callable"):
        x.register_hook(3)  # type: ignore[arg-type]
    x.register_hook(lambda g: g.sum())
    with pytest.raises(em.ShapeError, match=r"shape \(2,\)"):
        x.sum().backward()
    y = em.Tensor.ones((2,), device=device.autodiff()).require_grad()
    y.register_hook(lambda g: 1.0)
    with pytest.raises(em.DTypeError, match="Tensor or None"):
        y.sum().backward()
