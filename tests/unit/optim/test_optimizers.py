"""Optimizers against torch.optim, gradient containers, accumulation, clipping, state records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember.nn import Linear, Module, Param
from ember.optim import (
    SGD,
    AdaGrad,
    Adam,
    AdamW,
    GradientClipping,
    GradientsAccumulator,
    GradientsParams,
    Optimizer,
    RMSProp,
)

SHAPES = [(3, 4), (5,), (2, 2, 3)]


class Bag(Module):
    def __init__(self, values: list[np.ndarray], device: em.Device) -> None:
        super().__init__()
        for i, v in enumerate(values):
            setattr(self, f"p{i}", Param(em.Tensor.from_data(v, device=device)))


CASES: list[tuple[str, Callable[[], Optimizer], Callable[[Any], torch.optim.Optimizer], float]] = [
    ("sgd", lambda: SGD(), lambda ps: torch.optim.SGD(ps, lr=0.1), 0.1),
    ("sgd_momentum_wd", lambda: SGD(momentum=0.9, weight_decay=0.01, dampening=0.1),
     lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.1), 0.1),
    ("sgd_nesterov", lambda: SGD(momentum=0.9, nesterov=True),
     lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True), 0.05),
    ("adam", lambda: Adam(), lambda ps: torch.optim.Adam(ps, lr=1e-2), 1e-2),
    ("adam_wd", lambda: Adam(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
     lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), 1e-2),
    ("adamw", lambda: AdamW(weight_decay=0.05),
     lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.05), 1e-2),
    ("rmsprop", lambda: RMSProp(), lambda ps: torch.optim.RMSprop(ps, lr=1e-2), 1e-2),
    ("rmsprop_centered_momentum", lambda: RMSProp(alpha=0.9, eps=1e-6, weight_decay=0.01,
                                                   momentum=0.5, centered=True),
     lambda ps: torch.optim.RMSprop(ps, lr=1e-2, alpha=0.9, eps=1e-6, weight_decay=0.01,
                                    momentum=0.5, centered=True), 1e-2),
    ("adagrad", lambda: AdaGrad(), lambda ps: torch.optim.Adagrad(ps, lr=0.1), 0.1),
    ("adagrad_decay", lambda: AdaGrad(lr_decay=0.01, weight_decay=0.02,
                                       initial_accumulator_value=0.1, eps=1e-8),
     lambda ps: torch.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.02,
                                    initial_accumulator_value=0.1, eps=1e-8), 0.1),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_for_20_steps(case: Any, device: em.Device) -> None:
    _, make, make_torch, lr = case
    rng = np.random.default_rng(1)
    init = [rng.normal(size=s) for s in SHAPES]
    model = Bag(init, device.autodiff())
    tparams = [torch.tensor(v, requires_grad=True) for v in init]
    optim, topt = make(), make_torch(tparams)
    for _ in range(20):
        grads = GradientsParams()
        for p, tp in zip(model.parameters(), tparams):
            g = rng.normal(size=p.shape)
            grads.register(p.id, em.Tensor.from_data(g, device=device))
            tp.grad = torch.tensor(g)
        model = optim.step(lr, model, grads)
        topt.step()
    for p, tp in zip(model.parameters(), tparams):
        np.testing.assert_allclose(p.val().to_numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)
        assert p.val().is_require_grad()


def test_step_keeps_ids_strategy_and_consumes_gradients() -> None:
    dev = em.Device.cpu().autodiff().gradient_checkpointing()
    m = Linear(3, 2, device=dev, dtype=em.float64)
    ids = [p.id for p in m.parameters()]
    x = em.Tensor.ones((4, 3), dtype=em.float64)
    grads = GradientsParams.from_grads(m(x).sum().backward(), m)
    assert len(grads) == 2 and grads.get(m.weight.id) is not None
    assert not grads.get(m.weight.id).is_autodiff()  # type: ignore[union-attr]
    before = m.weight.val().to_numpy()
    out = SGD().step(0.5, m, grads)
    assert out is m and len(grads) == 0
    assert [p.id for p in m.parameters()] == ids
    w = m.weight.val()
    assert w.is_require_grad()
    assert w.gradient_checkpointing_strategy() is em.GradientCheckpointingStrategy.Balanced
    np.testing.assert_allclose(w.to_numpy(), before - 0.5 * 4.0)


def test_step_skips_parameters_without_gradient() -> None:
    m = Linear(3, 2, device=em.Device.cpu().autodiff())
    bias = m.bias.val()  # type: ignore[union-attr]
    grads = GradientsParams()
    grads.register(m.weight.id, em.Tensor.ones((2, 3)))
    Adam().step(0.1, m, grads)
    assert m.bias.val() is bias  # type: ignore[union-attr]


def test_step_rejects_node_keyed_gradients() -> None:
    m = Linear(3, 2, device=em.Device.cpu().autodiff())
    grads = m(em.Tensor.ones((1, 3))).sum().backward()
    with pytest.raises(TypeError, match=r"GradientsParams\.from_grads"):
        SGD().step(0.1, m, grads)  # type: ignore[arg-type]


def test_gradients_params_container() -> None:
    m = Linear(3, 2, device=em.Device.cpu().autodiff())
    grads = GradientsParams.from_grads(m(em.Tensor.ones((1, 3))).sum().backward(), m)
    assert m.weight.id in grads and set(grads.ids()) == {m.weight.id, m.bias.id}  # type: ignore[union-attr]
    moved = grads.to_device(em.Device.cpu(), m)
    assert len(moved) == 2
    g = grads.remove(m.weight.id)
    assert (
        g is not None and g.shape == (2, 3) and grads.get(m.weight.id) is None and len(grads) == 1
    )
    with pytest.raises(em.AutodiffError, match="plain gradient"):
        grads.register(m.weight.id, em.Tensor.ones((2, 3)).autodiff())


def test_frozen_parameters_get_no_gradient() -> None:
    m = Linear(3, 2, device=em.Device.cpu().autodiff())
    m.bias.val()  # type: ignore[union-attr]
    m.no_grad()
    x = em.Tensor.ones((1, 3), device=em.Device.cpu().autodiff()).require_grad()
    grads = GradientsParams.from_grads(m(x).sum().backward(), m)
    assert len(grads) == 0


def test_accumulating_three_micro_batches_equals_one_batch() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 5))
    y = rng.normal(size=(12, 2))
    dev = em.Device.cpu().autodiff()
    m = Linear(5, 2, device=dev, dtype=em.float64)

    def loss(xb: np.ndarray, yb: np.ndarray) -> em.Tensor:
        d = m(em.Tensor.from_data(xb, device=dev)) - em.Tensor.from_data(yb, device=dev)
        return (d * d).sum() * (1.0 / len(x))

    full = GradientsParams.from_grads(loss(x, y).backward(), m)
    acc = GradientsAccumulator()
    for i in range(3):
        part = slice(4 * i, 4 * i + 4)
        acc.accumulate(m, GradientsParams.from_grads(loss(x[part], y[part]).backward(), m))
    assert len(acc) == 2
    summed = acc.grads()
    assert len(acc) == 0
    for p in m.parameters():
        np.testing.assert_allclose(
            summed.get(p.id).to_numpy(),
            full.get(p.id).to_numpy(),
            rtol=1e-12,
            atol=1e-12,  # type: ignore[union-attr]
        )


@pytest.mark.parametrize("kind", ["value", "norm"])
def test_clipping_matches_torch(kind: str, device: em.Device) -> None:
    rng = np.random.default_rng(3)
    init = [rng.normal(size=s) for s in SHAPES]
    model = Bag(init, device.autodiff())
    tparams = [torch.tensor(v, requires_grad=True) for v in init]
    clip = GradientClipping.value(0.5) if kind == "value" else GradientClipping.norm(1.0)
    grads = GradientsParams()
    for p, tp in zip(model.parameters(), tparams):
        g = rng.normal(size=p.shape) * 3
        grads.register(p.id, em.Tensor.from_data(g, device=device))
        tp.grad = torch.tensor(g)
    SGD(grad_clipping=clip).step(1.0, model, grads)
    if kind == "value":
        torch.nn.utils.clip_grad_value_(tparams, 0.5)
    else:
        torch.nn.utils.clip_grad_norm_(tparams, 1.0)
    torch.optim.SGD(tparams, lr=1.0).step()
    for p, tp in zip(model.parameters(), tparams):
        np.testing.assert_allclose(p.val().to_numpy(), tp.detach().numpy(), atol=1e-9)


@pytest.mark.parametrize("scale", [3.0, 0.01], ids=["clipped", "under_the_limit"])
def test_clip_grad_norm_returns_the_norm_and_scales_with_a_clamp(
    scale: float, device: em.Device
) -> None:
    rng = np.random.default_rng(6)
    gs = [rng.normal(size=s) * scale for s in SHAPES]
    grads = GradientsParams()
    ids = [em.nn.ParamId() for _ in gs]
    for pid, g in zip(ids, gs):
        grads.register(pid, em.Tensor.from_data(g, device=device))
    want = [torch.tensor(g) for g in gs]
    for t in want:
        t.grad = t.clone()
    want_norm = float(torch.nn.utils.clip_grad_norm_(want, 1.0))
    got_norm = em.optim.clip_grad_norm(grads, 1.0)
    assert isinstance(got_norm, float)
    assert got_norm == pytest.approx(want_norm, rel=1e-12)
    for pid, g, t in zip(ids, gs, want):
        got = grads.get(pid)
        assert got is not None and got.dtype is em.float64
        if scale < 1:  # under the limit: a factor of exactly 1 leaves the gradient as it was
            np.testing.assert_array_equal(got.to_numpy(), g)
        np.testing.assert_allclose(got.to_numpy(), t.grad.numpy(), rtol=1e-12)  # type: ignore[union-attr]


def test_optimizer_state_round_trips_and_resumes_identically() -> None:
    rng = np.random.default_rng(4)
    init = [rng.normal(size=s) for s in SHAPES]
    gs = [[rng.normal(size=s) for s in SHAPES] for _ in range(6)]
    dev = em.Device.cpu().autodiff()

    def run(model: Bag, optim: Optimizer, steps: list[list[np.ndarray]]) -> None:
        for step in steps:
            grads = GradientsParams()
            for p, g in zip(model.parameters(), step):
                grads.register(p.id, em.Tensor.from_data(g))
            optim.step(0.01, model, grads)

    ref, ref_opt = Bag(init, dev), Adam()
    run(ref, ref_opt, gs)
    a, a_opt = Bag(init, dev), Adam()
    run(a, a_opt, gs[:3])
    state = a_opt.state_dict(a)
    assert "p0/exp_avg" in state and int(state["p0/step"].item()) == 3
    b, b_opt = Bag(init, dev), Adam()  # fresh ids: state is matched by parameter name
    b.load_state_dict(a.state_dict())
    b_opt.load_state_dict(state, b)
    run(b, b_opt, gs[3:])
    for p, q in zip(ref.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.val().to_numpy(), q.val().to_numpy())


def test_gradients_of_replicas_on_two_backends_sum_to_the_full_batch() -> None:
    try:
        tdev = em.Device.torch("cpu")
    except em.DeviceError as e:
        pytest.skip(f"torch backend unavailable: {e}")
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(8, 5)), rng.normal(size=(8, 2))
    home = em.Device.cpu().autodiff()
    m = Linear(5, 2, device=home, dtype=em.float64)

    def grads_on(model: Module, dev: em.Device, rows: slice) -> GradientsParams:
        d = model(em.Tensor.from_data(x[rows], device=dev)) - em.Tensor.from_data(
            y[rows], device=dev
        )
        return GradientsParams.from_grads((d * d).sum().backward(), model)

    full = grads_on(m, home, slice(None))
    acc = GradientsAccumulator()
    for dev, rows in ((home, slice(0, 4)), (tdev.autodiff(), slice(4, 8))):
        replica = m.fork(dev)
        acc.accumulate(m, grads_on(replica, dev, rows).to_device(em.Device.cpu(), replica))
    summed = acc.grads()
    for p in m.parameters():
        np.testing.assert_allclose(
            summed.get(p.id).to_numpy(), full.get(p.id).to_numpy(), atol=1e-12
        )  # type: ignore[union-attr]
