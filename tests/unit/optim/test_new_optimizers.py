"""Adadelta, NAdam, RAdam, Adamax and LBFGS against torch.optim (float64, 20 steps, 1e-6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember.nn import Module, Param
from ember.optim import LBFGS, Adadelta, Adamax, GradientsParams, NAdam, Optimizer, RAdam

SHAPES = [(3, 4), (5,), (2, 2, 3)]


class Bag(Module):
    def __init__(self, values: list[np.ndarray], device: em.Device) -> None:
        super().__init__()
        for i, v in enumerate(values):
            setattr(self, f"p{i}", Param(em.Tensor.from_data(v, device=device)))


T = torch.optim
CASES: list[tuple[str, Callable[[], Optimizer], Callable[[Any], T.Optimizer], float]] = [
    ("adadelta", lambda: Adadelta(), lambda ps: T.Adadelta(ps, lr=1.0), 1.0),
    ("adadelta_wd", lambda: Adadelta(rho=0.8, eps=1e-5, weight_decay=0.1),
     lambda ps: T.Adadelta(ps, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1), 0.5),
    ("adamax", lambda: Adamax(), lambda ps: T.Adamax(ps, lr=2e-3), 2e-3),
    ("adamax_wd", lambda: Adamax(betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05),
     lambda ps: T.Adamax(ps, lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05), 1e-2),
    ("nadam", lambda: NAdam(), lambda ps: T.NAdam(ps, lr=2e-3), 2e-3),
    ("nadam_wd", lambda: NAdam(betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=1e-2),
     lambda ps: T.NAdam(ps, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=1e-2),
     1e-2),
    ("nadamw", lambda: NAdam(weight_decay=0.1, decoupled_weight_decay=True),
     lambda ps: T.NAdam(ps, lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True), 1e-2),
    ("radam", lambda: RAdam(), lambda ps: T.RAdam(ps, lr=1e-2), 1e-2),
    ("radam_wd", lambda: RAdam(betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1),
     lambda ps: T.RAdam(ps, lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1), 1e-2),
    ("radamw", lambda: RAdam(weight_decay=0.1, decoupled_weight_decay=True),
     lambda ps: T.RAdam(ps, lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True), 1e-2),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_for_20_steps(case: Any, device: em.Device) -> None:
    _, make, make_torch, lr = case
    rng = np.random.default_rng(7)
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


def test_new_optimizers_take_groups_and_resume_from_state() -> None:
    rng = np.random.default_rng(8)
    init = [rng.normal(size=s) for s in SHAPES]
    gs = [[rng.normal(size=s) for s in SHAPES] for _ in range(8)]
    dev = em.Device.cpu().autodiff()

    def run(model: Bag, optim: Optimizer, steps: list[list[np.ndarray]]) -> None:
        for step in steps:
            grads = GradientsParams()
            for p, g in zip(model.parameters(), step):
                grads.register(p.id, em.Tensor.from_data(g))
            optim.step(None, model, grads)

    for cls in (Adadelta, Adamax, NAdam, RAdam):
        ref = Bag(init, dev)

        def make(m: Bag, cls: Any = cls) -> Optimizer:
            return cls([{"params": [m.p0], "weight_decay": 0.1}], lr=1e-2)  # type: ignore[attr-defined]

        run(ref, make(ref), gs)
        a = Bag(init, dev)
        a_opt = make(a)
        run(a, a_opt, gs[:5])
        b = Bag(init, dev)
        b.load_state_dict(a.state_dict())
        b_opt = make(b)
        b_opt.load_state_dict(a_opt.state_dict(a), b)
        run(b, b_opt, gs[5:])
        for p, q in zip(ref.parameters(), b.parameters()):
            np.testing.assert_array_equal(p.val().to_numpy(), q.val().to_numpy())


def test_bad_hyperparameters_raise() -> None:
    with pytest.raises(em.ShapeError, match=r"^Adadelta: expected 0 <= rho <= 1"):
        Adadelta(rho=1.5)
    with pytest.raises(em.ShapeError, match=r"^NAdam: expected momentum_decay >= 0"):
        NAdam(momentum_decay=-1.0)
    with pytest.raises(em.ShapeError, match=r"^RAdam: expected 0 <= betas\[1\] < 1"):
        RAdam(betas=(0.9, 1.0))
    with pytest.raises(em.ShapeError, match=r"^Adamax: expected eps >= 0"):
        Adamax(eps=-1.0)


# --------------------------------------------------------------------------- L-BFGS
class Net(Module):
    """L2-regularised logistic regression: strongly convex, so the comparison is not chaotic
    (on a non-convex loss 400 fixed-step iterations amplify the last bits of a dot product)."""

    def __init__(self, values: list[np.ndarray], device: em.Device) -> None:
        super().__init__()
        self.w, self.b = (Param(em.Tensor.from_data(v, device=device)) for v in values)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return x @ self.w.val() + self.b.val()


def _problem(seed: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    init = [rng.normal(size=(4, 2)), rng.normal(size=(2,)) * 0.1]
    x = rng.normal(size=(32, 4))
    s = np.sign(x[:, :2] + 0.5 * rng.normal(size=(32, 2)))  # labels +-1
    return init, x, s


def _torch_lbfgs(seed: int, steps: int, **kw: Any) -> tuple[list[np.ndarray], list[float]]:
    init, x, s = _problem(seed)
    ps = [torch.tensor(v, requires_grad=True) for v in init]
    xt, st = torch.tensor(x), torch.tensor(s)
    opt = torch.optim.LBFGS(ps, **kw)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        z = (xt @ ps[0] + ps[1]) * st
        loss = ((-z).exp() + 1.0).log().mean() + (ps[0] * ps[0]).mean() * 0.05
        loss.backward()
        return loss.detach()  # torch reads float(closure()): no warning on a detached loss

    losses = [float(opt.step(closure)) for _ in range(steps)]
    return [p.detach().numpy() for p in ps], losses


def _ember_lbfgs(
    seed: int, device: em.Device, steps: int, optim: LBFGS, model: Net | None = None
) -> tuple[Net, list[float]]:
    init, x, s = _problem(seed)
    net = model if model is not None else Net(init, device.autodiff())
    xe, se = em.Tensor.from_data(x, device=device), em.Tensor.from_data(s, device=device)

    def closure() -> tuple[em.Tensor, Any]:
        z = net(xe) * se
        w = net.w.val()
        loss = ((-z).exp() + 1.0).log().mean() + (w * w).mean() * 0.05
        return loss, loss.backward()

    losses = []
    for _ in range(steps):
        net = optim.step(None, net, closure)  # type: ignore[assignment]
        assert optim.last_loss is not None
        losses.append(optim.last_loss)
    return net, losses


LBFGS_CASES = {
    "default": {"lr": 1.0},
    "short_history": {"lr": 0.5, "max_iter": 5, "history_size": 3},
    "one_iteration": {"lr": 0.2, "max_iter": 1},
    "few_evals": {"lr": 0.8, "max_iter": 10, "max_eval": 4, "history_size": 5},
    "strong_wolfe": {"lr": 1.0, "line_search_fn": "strong_wolfe"},
    "strong_wolfe_short": {
        "lr": 2.0, "max_iter": 6, "history_size": 2, "line_search_fn": "strong_wolfe"
    },
    "strong_wolfe_grow": {"lr": 0.02, "max_iter": 5, "line_search_fn": "strong_wolfe"},
    "strong_wolfe_few_evals": {"lr": 5.0, "max_iter": 8, "max_eval": 6,
                               "line_search_fn": "strong_wolfe"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LBFGS_CASES))
def test_lbfgs_matches_torch_for_20_steps(name: str, device: em.Device) -> None:
    kw = LBFGS_CASES[name]
    want, want_losses = _torch_lbfgs(3, 20, **kw)
    net, losses = _ember_lbfgs(3, device, 20, LBFGS(**kw))  # type: ignore[arg-type]
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6, atol=0)
    for p, w in zip(net.parameters(), want):
        np.testing.assert_allclose(p.val().to_numpy(), w, rtol=0, atol=1e-6)


def test_lbfgs_state_dict_resumes_exactly() -> None:
    dev = em.Device.cpu()
    kw: dict[str, Any] = {"lr": 0.5, "max_iter": 4, "history_size": 3}
    ref, _ = _ember_lbfgs(5, dev, 6, LBFGS(**kw))
    a_opt = LBFGS(**kw)
    a, _ = _ember_lbfgs(5, dev, 3, a_opt)
    state = a_opt.state_dict(a)
    assert int(state["w/step"].item()) == 12 and "w/old_dir.2" in state
    init, _, _ = _problem(5)
    b = Net(init, dev.autodiff())
    b.load_state_dict(a.state_dict())
    b_opt = LBFGS(**kw)
    b_opt.load_state_dict(state, b)
    b, _ = _ember_lbfgs(5, dev, 3, b_opt, b)
    for p, q in zip(ref.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.val().to_numpy(), q.val().to_numpy())


def test_lbfgs_misuse_raises() -> None:
    init, _, _ = _problem(0)
    net = Net(init, em.Device.cpu().autodiff())
    with pytest.raises(em.DTypeError, match="expected a closure returning"):
        LBFGS(lr=1.0).step(None, net, GradientsParams())  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match=r"closure to return \(loss, grads\)"):
        LBFGS(lr=1.0).step(None, net, lambda: 1.0)  # type: ignore[arg-type, return-value]
    with pytest.raises(em.ShapeError, match="one set of options"):
        LBFGS([{"params": [net.w], "lr": 0.1}])
    with pytest.raises(em.ShapeError, match="history_size to be an int >= 1"):
        LBFGS(history_size=0)
    with pytest.raises(em.ShapeError, match=r"line_search_fn None .* or 'strong_wolfe'"):
        LBFGS(line_search_fn="backtracking")


def test_cubic_min_of_the_line_search() -> None:
    from ember.optim.lbfgs_search import cubic_min

    # (x - 1)^2 through x = 0 and x = 3: its minimiser, from either order of the points
    assert cubic_min(0.0, 1.0, -2.0, 3.0, 4.0, 4.0) == pytest.approx(1.0, abs=1e-12)
    assert cubic_min(3.0, 4.0, 4.0, 0.0, 1.0, -2.0) == pytest.approx(1.0, abs=1e-12)
    assert cubic_min(0.0, 1.0, -2.0, 3.0, 4.0, 4.0, bounds=(2.0, 5.0)) == 2.0  # clamped
    assert cubic_min(0.0, 0.0, 2.0, 1.0, 4.0 / 3.0, 2.0) == 0.5  # no minimum: the middle


def test_lbfgs_resumes_from_a_training_record(tmp_path: Any) -> None:
    from ember import record

    dev = em.Device.cpu()
    kw: dict[str, Any] = {"lr": 1.0, "max_iter": 3, "history_size": 4,
                          "line_search_fn": "strong_wolfe"}  # fmt: skip
    ref, _ = _ember_lbfgs(6, dev, 6, LBFGS(**kw))
    a_opt = LBFGS(**kw)
    a, _ = _ember_lbfgs(6, dev, 3, a_opt)
    record.save_training(tmp_path / "run.safetensors", a, a_opt, step=3)
    init, _, _ = _problem(6)
    b, b_opt = Net(init, dev.autodiff()), LBFGS(**kw)
    assert record.load_training(tmp_path / "run.safetensors", b, b_opt) == 3
    b, _ = _ember_lbfgs(6, dev, 3, b_opt, b)
    for p, q in zip(ref.parameters(), b.parameters()):
        np.testing.assert_array_equal(p.val().to_numpy(), q.val().to_numpy())
