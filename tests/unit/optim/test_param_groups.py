"""Parameter groups (API.md "Parameter groups") against torch.optim param_groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember.nn import Module, Param
from ember.optim import SGD, Adam, AdamW, GradientsParams, no_decay_groups

SHAPES = [(3, 4), (5,), (2, 2, 3), (4,)]


class Bag(Module):
    def __init__(self, values: list[np.ndarray], device: em.Device) -> None:
        super().__init__()
        for i, v in enumerate(values):
            setattr(self, f"p{i}", Param(em.Tensor.from_data(v, device=device)))


def _run(
    make: Callable[[list[Param]], em.optim.Optimizer],
    topt: torch.optim.Optimizer,
    lr: float | None,
    device: em.Device,
    steps: int = 20,
    seed: int = 0,
) -> None:
    """``steps`` updates of the same random gradients on both sides; then equal within 1e-6."""
    rng = np.random.default_rng(seed)
    init = [rng.normal(size=s) for s in SHAPES]
    model = Bag(init, device.autodiff())
    tparams = [torch.tensor(v, requires_grad=True) for v in init]
    groups = _remap(topt, tparams)
    topt.param_groups.clear()
    for group in groups:
        topt.add_param_group(group)
    optim = make(list(model.parameters()))
    for _ in range(steps):
        grads = GradientsParams()
        for p, tp in zip(model.parameters(), tparams):
            g = rng.normal(size=p.shape)
            grads.register(p.id, em.Tensor.from_data(g, device=device))
            tp.grad = torch.tensor(g)
        optim.step(lr, model, grads)
        topt.step()
    for p, tp in zip(model.parameters(), tparams):
        np.testing.assert_allclose(p.val().to_numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)


def _remap(topt: torch.optim.Optimizer, tparams: list[torch.Tensor]) -> list[dict[str, Any]]:
    """The torch optimizer's groups with placeholder index lists swapped for real tensors."""
    out = []
    for group in topt.param_groups:
        g = dict(group)
        g["params"] = [tparams[int(i.item())] for i in g["params"]]
        out.append(g)
    return out


def _idx(*i: int) -> list[torch.Tensor]:
    """Placeholder 'params' for torch groups: parameter indices, replaced by ``_remap``."""
    return [torch.tensor(float(k), requires_grad=True) for k in i]


def test_adamw_groups_with_own_lr_decay_and_betas(device: em.Device) -> None:
    # step(None): each group's lr; parameters in no group (p3) use the constructor's options
    topt = torch.optim.AdamW(
        [  # type: ignore[arg-type]
            {"params": _idx(0), "weight_decay": 0.1, "lr": 2e-2},
            {"params": _idx(1, 2), "weight_decay": 0.0, "betas": (0.8, 0.95)},
            {"params": _idx(3)},
        ],
        lr=1e-2,
        weight_decay=0.05,
    )

    def make(ps: list[Param]) -> AdamW:
        return AdamW(
            [
                {"params": [ps[0]], "weight_decay": 0.1, "lr": 2e-2},
                {"params": [ps[1], ps[2]], "weight_decay": 0.0, "betas": (0.8, 0.95)},
            ],
            lr=1e-2,
            weight_decay=0.05,
        )

    _run(make, topt, None, device)


def test_a_number_applies_to_every_group_times_its_scale(device: em.Device) -> None:
    topt = torch.optim.SGD(
        [
            {"params": _idx(0, 1), "lr": 0.1 * 0.5, "momentum": 0.5},
            {"params": _idx(2, 3), "lr": 0.1},
        ],
        lr=0.1,
        momentum=0.9,
        weight_decay=0.01,
    )

    def make(ps: list[Param]) -> SGD:
        # the group's own lr (1.0) is ignored: a number passed to step wins
        return SGD(
            [{"params": ps[:2], "lr_scale": 0.5, "momentum": 0.5, "lr": 1.0}],
            momentum=0.9,
            weight_decay=0.01,
        )

    _run(make, topt, 0.1, device)


def test_none_without_group_lr_uses_the_constructors_times_the_scale(device: em.Device) -> None:
    topt = torch.optim.Adam(
        [{"params": _idx(0, 1, 2), "lr": 1e-2 * 0.25}, {"params": _idx(3), "lr": 1e-2}]
    )

    def make(ps: list[Param]) -> Adam:
        return Adam([{"params": ps[:3], "lr_scale": 0.25}], lr=1e-2)

    _run(make, topt, None, device)


def test_constructor_lr_and_a_list_of_params(device: em.Device) -> None:
    topt = torch.optim.Adam(_idx(0, 1, 2, 3), lr=3e-3)
    _run(lambda ps: Adam(ps, lr=3e-3), topt, None, device)


def test_fused_adam_runs_once_per_group_and_device(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        dev = em.Device.torch("cpu")
    except em.DeviceError as e:
        pytest.skip(f"torch backend unavailable: {e}")
    backend = type(em.Tensor.zeros((1,), device=dev)._hardware.b)
    calls: list[int] = []
    real = backend.adam_many

    def counting(self: Any, params: list[Any], *args: Any) -> Any:
        calls.append(len(params))
        return real(self, params, *args)

    monkeypatch.setattr(backend, "adam_many", counting)
    rng = np.random.default_rng(2)
    model = Bag([rng.normal(size=s) for s in SHAPES], dev.autodiff())
    ps = list(model.parameters())
    for optim, want in (
        (AdamW(lr=1e-3), [4]),
        (AdamW([{"params": ps[:1], "weight_decay": 0.0}], lr=1e-3), [1, 3]),
    ):
        calls.clear()
        grads = GradientsParams()
        for p in ps:
            grads.register(p.id, em.Tensor.ones(p.shape, device=dev, dtype=em.float64))
        optim.step(None, model, grads)
        assert sorted(calls) == sorted(want)


def test_state_records_round_trip_with_groups() -> None:
    rng = np.random.default_rng(4)
    init = [rng.normal(size=s) for s in SHAPES]
    gs = [[rng.normal(size=s) for s in SHAPES] for _ in range(6)]
    dev = em.Device.cpu().autodiff()

    def make(model: Bag) -> AdamW:
        ps = list(model.parameters())
        return AdamW([{"params": ps[:2], "weight_decay": 0.0, "lr_scale": 2.0}], lr=1e-2)

    def run(model: Bag, optim: AdamW, steps: list[list[np.ndarray]]) -> None:
        for step in steps:
            grads = GradientsParams()
            for p, g in zip(model.parameters(), step):
                grads.register(p.id, em.Tensor.from_data(g))
            optim.step(None, model, grads)

    ref = Bag(init, dev)
    run(ref, make(ref), gs)
    a = Bag(init, dev)
    a_opt = make(a)
    run(a, a_opt, gs[:3])
    b = Bag(init, dev)
    b.load_state_dict(a.state_dict())
    b_opt = make(b)
    b_opt.load_state_dict(a_opt.state_dict(a), b)
    run(b, b_opt, gs[3:])
    for p, q in zip(ref.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.val().to_numpy(), q.val().to_numpy())


class Tiny(Module):
    def __init__(self) -> None:
        super().__init__()
        dev = em.Device.cpu().autodiff()
        self.emb = em.nn.Embedding(10, 4, device=dev)
        self.norm = em.nn.LayerNorm(4, device=dev)
        self.fc = em.nn.Linear(4, 3, device=dev)


def test_no_decay_groups_puts_biases_norms_and_embeddings_apart() -> None:
    m = Tiny()
    decay, quiet = no_decay_groups(m, 0.1)
    assert decay["weight_decay"] == 0.1 and quiet["weight_decay"] == 0.0
    assert [p.id for p in decay["params"]] == [m.fc.weight.id]
    want = {m.emb.weight.id, m.norm.weight.id, m.norm.bias.id, m.fc.bias.id}  # type: ignore[union-attr]
    assert {p.id for p in quiet["params"]} == want
    optim = AdamW(no_decay_groups(m, 0.1), lr=1e-3)
    assert optim._group_of[m.fc.weight.id].rule.weight_decay == 0.1  # type: ignore[attr-defined]
    assert optim._group_of[m.emb.weight.id].rule.weight_decay == 0.0  # type: ignore[attr-defined]


def test_bad_groups_raise_clear_errors() -> None:
    m = Tiny()
    w = m.fc.weight
    with pytest.raises(em.DTypeError, match=r"first argument .* parameter groups.*AdamW\(lr="):
        AdamW(0.9)  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match=r"unknown keys \['momentum'\]"):
        AdamW([{"params": [w], "momentum": 0.9}])
    with pytest.raises(em.DTypeError, match="has no 'params'"):
        AdamW([{"lr": 0.1}])
    with pytest.raises(em.DTypeError, match="expected Params"):
        AdamW([{"params": [w.val()]}])
    with pytest.raises(em.ShapeError, match="at most one group"):
        AdamW([{"params": [w]}, {"params": [w]}])
    with pytest.raises(em.ShapeError, match=r"parameter group 0: AdamW: expected 0 <= betas\[0\]"):
        AdamW([{"params": [w], "betas": (1.5, 0.9)}])
    with pytest.raises(em.ShapeError, match="lr_scale >= 0"):
        AdamW([{"params": [w], "lr_scale": -1.0}])
    with pytest.raises(em.ShapeError, match="no_decay_groups: expected weight_decay >= 0"):
        no_decay_groups(m, -0.1)
    grads = GradientsParams()
    grads.register(w.id, em.Tensor.ones(w.shape))
    with pytest.raises(em.ShapeError, match=r"group 0.*lr=None.*lr= to AdamW"):
        AdamW([{"params": [w]}]).step(None, m, grads)


class HalfStep(em.optim.Optimizer):
    """A user's optimizer with no options and no ``lr`` keyword, passing groups through."""

    def __init__(self, groups: Any = None) -> None:
        super().__init__(groups)

    def update(self, lr: float, param: Any, grad: Any, state: Any) -> Any:
        return param - grad * (lr / 2), state


def test_groups_that_only_set_rates_work_for_any_optimizer() -> None:
    m = Tiny()
    w, b = m.fc.weight, m.fc.bias
    assert b is not None
    optim = HalfStep([{"params": [w], "lr_scale": 4.0}])
    before_w, before_b = w.val().to_numpy(), b.val().to_numpy()
    grads = GradientsParams()
    grads.register(w.id, em.Tensor.ones(w.shape))
    grads.register(b.id, em.Tensor.ones(b.shape))
    optim.step(0.1, m, grads)
    np.testing.assert_allclose(w.val().to_numpy(), before_w - 0.2, rtol=1e-6)
    np.testing.assert_allclose(b.val().to_numpy(), before_b - 0.05, rtol=1e-6)
    with pytest.raises(em.DTypeError, match="unknown keys"):
        HalfStep([{"params": [w], "weight_decay": 0.0}])
