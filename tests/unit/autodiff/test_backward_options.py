"""``backward(gradient=, retain_graph=, inputs=)`` against PyTorch in float64."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")
Strategy = em.GradientCheckpointingStrategy
TOL = {"rtol": 1e-12, "atol": 1e-12}


def _data(seed: int, shape: tuple[int, ...] = (3, 4)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape)


def _leaf(device: em.Device, a: np.ndarray, strategy: Strategy = Strategy.Disabled) -> em.Tensor:
    t = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64)
    return t.with_gradient_checkpointing_strategy(strategy).require_grad()


def _t(a: np.ndarray, grad: bool = True) -> Any:
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def _close(got: em.Tensor | None, want: Any) -> None:
    assert got is not None
    np.testing.assert_allclose(got.to_numpy(), want.detach().numpy(), **TOL)


# ---------------------------------------------------------------------------- gradient=
@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_gradient_seed_matches_torch(device: em.Device, node_seed: int, strategy: Strategy) -> None:
    a, v = _data(node_seed), _data(node_seed + 1)
    x, tx = _leaf(device, a, strategy), _t(a)
    y = (x.exp() * x).tanh()
    grads = y.backward(em.Tensor.from_data(v, device=device, dtype=em.float64))
    (tx.exp() * tx).tanh().backward(_t(v, grad=False))
    _close(x.grad(grads), tx.grad)


def test_gradient_seed_under_create_graph(device: em.Device, node_seed: int) -> None:
    a, v = _data(node_seed), _data(node_seed + 1)
    x, tx = _leaf(device, a), _t(a)
    seed = em.Tensor.from_data(v, device=device, dtype=em.float64)
    gx = x.grad(x.sin().backward(seed, create_graph=True))
    (tg,) = torch.autograd.grad(tx.sin(), tx, _t(v, grad=False), create_graph=True)
    _close(gx, tg)
    assert gx is not None
    second = x.grad(gx.sum().backward())
    tg.sum().backward()
    _close(second, tx.grad)


def test_gradient_seed_is_cast_to_the_output_dtype(device: em.Device) -> None:
    x = em.Tensor.ones((2,), device=device.autodiff(), dtype=em.float64).require_grad()
    seed = em.Tensor.from_data([2.0, 3.0], device=device, dtype=em.float32)
    g = x.grad((x * 1.0).backward(seed))
    assert g is not None and g.dtype is em.float64 and g.tolist() == [2.0, 3.0]


def test_gradient_seed_errors(device: em.Device) -> None:
    x = em.Tensor.ones((2, 3), device=device.autodiff(), dtype=em.float64).require_grad()
    y = x * 2.0
    with pytest.raises(em.ShapeError, match=r"output's shape \(2, 3\), got \(3,\)"):
        y.backward(em.Tensor.ones((3,), device=device, dtype=em.float64))
    with pytest.raises(em.DTypeError, match=r"expected gradient= to be an em\.Tensor"):
        y.backward(np.ones((2, 3)))  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match="float gradient="):
        y.backward(em.Tensor.ones((2, 3), device=device, dtype=em.int64))
    other = em.Device.torch("cpu") if device == em.Device.cpu() else em.Device.cpu()
    with pytest.raises(em.DeviceError, match=r"gradient\.to_device"):
        y.backward(em.Tensor.ones((2, 3), device=other, dtype=em.float64))
    # nothing was consumed by the rejected calls
    assert x.grad(y.backward()).tolist() == [[2.0] * 3] * 2  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- retain_graph=
@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_retain_graph_allows_a_second_backward(device: em.Device, strategy: Strategy) -> None:
    x = _leaf(device, np.array([0.5, -1.0, 2.0]), strategy)
    loss = ((x * 3.0).exp() * x).sum()
    first = x.grad(loss.backward(retain_graph=True))
    second = x.grad(loss.backward(retain_graph=True))
    third = x.grad(loss.backward())  # the last pass consumes the graph
    assert first is not None and second is not None and third is not None
    np.testing.assert_array_equal(first.to_numpy(), second.to_numpy())
    np.testing.assert_array_equal(first.to_numpy(), third.to_numpy())
    with pytest.raises(em.AutodiffError, match="already consumed"):
        loss.backward()


def test_without_retain_graph_a_second_backward_raises_like_torch(device: em.Device) -> None:
    x = _leaf(device, np.array([0.5, -1.0]))
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(em.AutodiffError, match=r"retain_graph=True|already consumed"):
        loss.backward()
    tx = _t(np.array([0.5, -1.0]))
    tloss = (tx.exp() * tx).sum()
    tloss.backward()
    with pytest.raises(RuntimeError, match="second time"):
        tloss.backward()


# ---------------------------------------------------------------------------- inputs=
@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_inputs_equal_torch_retain_grad(
    device: em.Device, node_seed: int, strategy: Strategy
) -> None:
    a, c = _data(node_seed), _data(node_seed + 1)
    x, w = _leaf(device, a, strategy), _leaf(device, c, strategy)
    h1 = (x * w).exp()
    h2 = h1.tanh() + x
    loss = (h2 * h2).sum()
    grads = loss.backward(inputs=[h1, h2, x])
    tx, tw = _t(a), _t(c)
    th1 = (tx * tw).exp()
    th2 = th1.tanh() + tx
    th1.retain_grad()
    th2.retain_grad()
    (th2 * th2).sum().backward()
    _close(h1.grad(grads), th1.grad)
    _close(h2.grad(grads), th2.grad)
    _close(grads.get(h1), th1.grad)
    _close(x.grad(grads), tx.grad)
    assert w.grad(grads) is None and len(grads) == 3  # only the chosen tensors, as torch


def test_inputs_skip_steps_that_lead_elsewhere(device: em.Device) -> None:
    x = _leaf(device, np.array([1.0, 2.0]))
    w = _leaf(device, np.array([3.0, 4.0]))
    seen: list[str] = []
    h = x * 2.0
    u = w * 5.0
    u.register_hook(lambda g: seen.append("u") or None)  # type: ignore[func-returns-value]
    grads = (h * u).sum().backward(inputs=h)
    assert h.grad(grads).tolist() == [15.0, 20.0]  # type: ignore[union-attr]
    assert seen == [] and x.grad(grads) is None and w.grad(grads) is None


def test_inputs_under_create_graph(device: em.Device, node_seed: int) -> None:
    a = _data(node_seed, (4,))
    x, tx = _leaf(device, a), _t(a)
    h, th = x.sin(), tx.sin()
    grads = (h * h * x).sum().backward(create_graph=True, inputs=[h, x])
    tgh, tgx = torch.autograd.grad((th * th * tx).sum(), [th, tx], create_graph=True)
    _close(h.grad(grads), tgh)
    gx = x.grad(grads)
    _close(gx, tgx)
    assert gx is not None and gx.is_tracked() and len(grads) == 2
    second = x.grad(gx.sum().backward())
    tgx.sum().backward()
    _close(second, tx.grad)


def test_module_level_backward_takes_the_options(device: em.Device) -> None:
    x = _leaf(device, np.array([1.0, -2.0]))
    h = x * x
    seed = em.Tensor.from_data([1.0, 0.5], device=device, dtype=em.float64)
    grads = em.autodiff.backward(h, gradient=seed, retain_graph=True, inputs=[h, x])
    assert h.grad(grads).tolist() == [1.0, 0.5]  # type: ignore[union-attr]
    assert x.grad(grads).tolist() == [2.0, -2.0]  # type: ignore[union-attr]
    assert x.grad(em.autodiff.backward(h)).tolist() == [2.0, -4.0]  # type: ignore[union-attr]


def test_inputs_errors(device: em.Device) -> None:
    x = _leaf(device, np.array([1.0, 2.0]))
    loss = (x * x).sum()
    with pytest.raises(em.AutodiffError, match="at least one tensor"):
        loss.backward(inputs=[])
    with pytest.raises(em.DTypeError, match=r"inputs\[0\] to be an em.Tensor"):
        loss.backward(inputs=[3.0])  # type: ignore[list-item]
    untracked = em.Tensor.ones((2,), device=device.autodiff())
    with pytest.raises(em.AutodiffError, match=r"inputs\[1\] to be a tracked tensor"):
        loss.backward(inputs=[x, untracked])
    with pytest.raises(em.DTypeError, match=r"Gradients\.get"):
        loss.backward().get("x")
