"""Higher-order gradients end to end against PyTorch in float64: a WGAN-GP critic step, the
Hessian-vector product of an MLP loss, a one-step MAML update, the third derivative of tanh.
Each runs under ``Disabled``, ``Balanced`` and a memory budget on every backend."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
TOL = {"rtol": 1e-9, "atol": 1e-11}

Params = Sequence[em.Tensor]


def _arrays(rng: np.random.Generator, sizes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    return [rng.normal(scale=0.5, size=s) for s in sizes]


def _leaves(arrays: list[np.ndarray], device: em.Device) -> list[em.Tensor]:
    return [em.Tensor.from_data(a, device=device, dtype=em.float64).require_grad() for a in arrays]


def _t(arrays: list[np.ndarray], grad: bool = True) -> list[torch.Tensor]:
    return [torch.from_numpy(a.copy()).requires_grad_(grad) for a in arrays]


def _plain(a: np.ndarray, device: em.Device) -> em.Tensor:
    return em.Tensor.from_data(a, device=device.without_autodiff(), dtype=em.float64)


def _mlp(p: Params, x: em.Tensor) -> em.Tensor:
    w1, b1, w2, b2 = p
    return F.linear(F.silu(F.linear(x, w1, b1)), w2, b2)


def _tmlp(p: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    w1, b1, w2, b2 = p
    return TF.linear(TF.silu(TF.linear(x, w1, b1)), w2, b2)


SIZES = [(6, 4), (6,), (3, 6), (3,)]
STRATEGIES = ["disabled", "balanced", "budget"]


def _device(device: em.Device, strategy: str) -> em.Device:
    ad = device.autodiff()
    if strategy == "budget":  # small enough that the budget drops values
        return ad.gradient_checkpointing(bytes=2048)
    return ad.gradient_checkpointing() if strategy == "balanced" else ad


def _close(got: Sequence[em.Tensor | None], want: Sequence[torch.Tensor]) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert g is not None, f"gradient {i} is missing"
        np.testing.assert_allclose(g.to_numpy(), w.detach().numpy(), err_msg=f"grad {i}", **TOL)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_wgan_gp_critic_step(device: em.Device, strategy: str, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    params = _arrays(rng, [(8, 4), (8,), (1, 8), (1,)])
    real, fake = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)) + 1.0
    mix = rng.uniform(size=(5, 1))
    lam = 10.0
    dev = _device(device, strategy)

    def critic(p: Params, x: em.Tensor) -> em.Tensor:
        w1, b1, w2, b2 = p
        return F.linear(F.relu(F.linear(x, w1, b1)) + F.linear(x, w1, b1).tanh(), w2, b2)

    p = _leaves(params, dev)
    x_hat = _plain(mix * real + (1 - mix) * fake, device).autodiff().require_grad()
    x_hat = x_hat.with_gradient_checkpointing_strategy(dev.gradient_checkpointing_strategy())
    (g,) = em.autodiff.grad(critic(p, x_hat).sum(), x_hat, create_graph=True)
    assert g is not None and g.is_tracked()
    norm = ((g * g).sum_dim(1) + 1e-12).sqrt()
    penalty = ((norm - 1.0) * (norm - 1.0)).mean()
    loss = critic(p, _plain(fake, device)).mean() - critic(p, _plain(real, device)).mean()
    grads = (loss + penalty * lam).backward()

    tp = _t(params)

    def tcritic(q: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = q
        return TF.linear(TF.relu(TF.linear(x, w1, b1)) + TF.linear(x, w1, b1).tanh(), w2, b2)

    tx = torch.from_numpy(mix * real + (1 - mix) * fake).requires_grad_(True)
    (tg,) = torch.autograd.grad(tcritic(tp, tx).sum(), tx, create_graph=True)
    tnorm = ((tg * tg).sum(1, keepdim=True) + 1e-12).sqrt()
    tpen = ((tnorm - 1.0) ** 2).mean()
    tloss = tcritic(tp, torch.from_numpy(fake)).mean() - tcritic(tp, torch.from_numpy(real)).mean()
    want = torch.autograd.grad(tloss + lam * tpen, tp)
    np.testing.assert_allclose(g.to_numpy(), tg.detach().numpy(), **TOL)
    _close([x.grad(grads) for x in p], want)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hvp_of_an_mlp_loss(device: em.Device, strategy: str, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    params = _arrays(rng, SIZES)
    vs = _arrays(rng, SIZES)
    x = rng.normal(size=(7, 4))
    y = rng.integers(0, 3, size=(7,))
    dev = _device(device, strategy)
    xs = _plain(x, device)
    ys = em.Tensor.from_data(y, device=device.without_autodiff())

    def loss(*p: em.Tensor) -> em.Tensor:
        return F.cross_entropy(_mlp(p, xs), ys)

    value, hv = em.autodiff.hvp(loss, _leaves(params, dev), [_plain(v, device) for v in vs])
    tp = _t(params)
    tvalue, thv = torch.autograd.functional.hvp(
        lambda *q: TF.cross_entropy(_tmlp(q, torch.from_numpy(x)), torch.from_numpy(y)),
        tuple(tp),
        tuple(torch.from_numpy(v) for v in vs),
    )
    assert not value.is_autodiff() and all(not h.is_autodiff() for h in hv)
    np.testing.assert_allclose(value.item(), tvalue.item(), **TOL)
    _close(hv, thv)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_step_maml(device: em.Device, strategy: str, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    params = _arrays(rng, SIZES)
    xa, ya = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    xb, yb = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    alpha = 0.3
    dev = _device(device, strategy)

    def mse(p: Params, x: np.ndarray, y: np.ndarray) -> em.Tensor:
        d = _mlp(p, _plain(x, device)) - _plain(y, device)
        return (d * d).mean()

    p = _leaves(params, dev)
    inner = em.autodiff.grad(mse(p, xa, ya), p, create_graph=True)
    adapted = [w - g * alpha for w, g in zip(p, inner) if g is not None]
    meta = em.autodiff.grad(mse(adapted, xb, yb), p)

    tp = _t(params)

    def tmse(q: Sequence[torch.Tensor], x: np.ndarray, y: np.ndarray) -> torch.Tensor:
        return ((_tmlp(q, torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()

    tinner = torch.autograd.grad(tmse(tp, xa, ya), tp, create_graph=True)
    tadapted = [w - alpha * g for w, g in zip(tp, tinner)]
    _close(meta, torch.autograd.grad(tmse(tadapted, xb, yb), tp))
    assert all(not g.is_autodiff() for g in meta if g is not None)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_third_derivative_of_tanh(device: em.Device, strategy: str, node_seed: int) -> None:
    a = np.random.default_rng(node_seed).uniform(-2, 2, size=(9,))
    x = _leaves([a], _device(device, strategy))[0]
    g1 = x.grad(x.tanh().sum().backward(create_graph=True))
    g2 = x.grad(g1.sum().backward(create_graph=True))
    g3 = x.grad(g2.sum().backward())
    t = np.tanh(a)
    # tanh' = 1 - t^2, tanh'' = -2 t (1 - t^2), tanh''' = (6 t^2 - 2)(1 - t^2)
    np.testing.assert_allclose(g1.to_numpy(), 1 - t * t, **TOL)
    np.testing.assert_allclose(g2.to_numpy(), -2 * t * (1 - t * t), **TOL)
    np.testing.assert_allclose(g3.to_numpy(), (6 * t * t - 2) * (1 - t * t), **TOL)
    assert g1.is_tracked() and g2.is_tracked() and not g3.is_autodiff()
    tx = torch.from_numpy(a).requires_grad_(True)
    (t1,) = torch.autograd.grad(tx.tanh().sum(), tx, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), tx, create_graph=True)
    (t3,) = torch.autograd.grad(t2.sum(), tx)
    _close([g3], [t3])
