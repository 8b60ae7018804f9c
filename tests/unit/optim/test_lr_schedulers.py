"""The PyTorch-style schedulers of em.optim.lr against torch.optim.lr_scheduler, value by value."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import ember as em
from ember.optim import lr

S = torch.optim.lr_scheduler


def _torch_rates(base: float, make: Callable[[torch.optim.Optimizer], Any], n: int) -> list[float]:
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base, momentum=0.9)
    sched = make(opt)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def _close(ours: Sequence[float], theirs: Sequence[float]) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (i, a, b)


CASES = [
    ("step_per_epoch", lambda: lr.Step(0.1, 3, 0.5, per_epoch=True), 0.1,
     lambda o: S.StepLR(o, 3, 0.5), 20),
    ("multistep", lambda: lr.MultiStep(0.1, [9, 2, 5, 5], 0.5, per_epoch=True), 0.1,
     lambda o: S.MultiStepLR(o, [2, 5, 5, 9], 0.5), 14),
    ("exponential_per_epoch", lambda: lr.Exponential(0.1, 0.8, per_epoch=True), 0.1,
     lambda o: S.ExponentialLR(o, 0.8), 20),
    ("cosine_past_its_period", lambda: lr.CosineAnnealing(0.1, 0.001, 10, periodic=True), 0.1,
     lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 47),
    ("one_cycle_cos", lambda: lr.OneCycle(0.2, 50), 0.2,
     lambda o: S.OneCycleLR(o, max_lr=0.2, total_steps=50), 50),
    ("one_cycle_linear", lambda: lr.OneCycle(0.2, 37, 0.25, "linear", 10.0, 100.0), 0.2,
     lambda o: S.OneCycleLR(o, 0.2, 37, pct_start=0.25, anneal_strategy="linear",
                            div_factor=10.0, final_div_factor=100.0), 37),
    ("one_cycle_three_phase", lambda: lr.OneCycle(1.0, 40, three_phase=True), 1.0,
     lambda o: S.OneCycleLR(o, 1.0, 40, three_phase=True), 40),
    ("warm_restarts", lambda: lr.CosineAnnealingWarmRestarts(0.1, 7, eta_min=0.01), 0.1,
     lambda o: S.CosineAnnealingWarmRestarts(o, T_0=7, eta_min=0.01), 40),
    ("warm_restarts_mult", lambda: lr.CosineAnnealingWarmRestarts(0.1, 3, 2, per_epoch=True), 0.1,
     lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2), 60),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case: Any) -> None:
    _, make, base, make_torch, n = case
    sched = make()
    _close([next(sched) for _ in range(n)], _torch_rates(base, make_torch, n))


def test_per_epoch_flags() -> None:
    assert lr.Step(0.1, 3, per_epoch=True).per_epoch
    assert not lr.Step(0.1, 3).per_epoch and not lr.OneCycle(0.1, 10).per_epoch
    assert lr.ReduceOnPlateau(0.1).per_epoch


def test_one_cycle_ends_after_total_steps() -> None:
    sched = lr.OneCycle(0.1, 5)
    assert len(list(sched)) == 5
    with pytest.raises(em.ShapeError, match=r"step in \[0, 5\)"):
        sched.rate(5)


PLATEAU: dict[str, dict[str, Any]] = {
    "min_rel": {"patience": 2},
    "max_abs_cooldown": {
        "mode": "max", "threshold_mode": "abs", "threshold": 0.05, "cooldown": 2, "patience": 1
    },
    "min_lr_floor": {"factor": 0.5, "patience": 0, "min_lr": 0.02},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PLATEAU))
def test_reduce_on_plateau_matches_torch(name: str) -> None:
    kw = PLATEAU[name]
    metrics = [1.0, 0.9, 0.95, 0.9, 0.91, 0.9, 0.92, 0.5, 0.6, 0.7, 0.6, 0.65, 0.6, float("nan")]
    metrics += [0.6] * 14 + [0.1, 0.2, 1.5, 2.5, 2.4, 2.3]
    ours = lr.ReduceOnPlateau(0.1, **kw)
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    theirs = S.ReduceLROnPlateau(opt, **kw)
    seen = set()
    for m in metrics:
        assert next(ours) == next(ours) == opt.param_groups[0]["lr"]  # next() alone never moves
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs.step(m)
        assert ours.report(m) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12)
        seen.add(ours.lr)
    assert len(seen) >= 3  # the rate did drop, more than once


def test_reduce_on_plateau_state_resumes_through_json() -> None:
    a = lr.ReduceOnPlateau(0.1, patience=1, cooldown=1)
    for m in (1.0, 1.0, 1.0):
        a.report(m)
    b = lr.ReduceOnPlateau(0.1, patience=1, cooldown=1)
    b.load_state(json.loads(json.dumps(a.state())))
    for m in (1.0, 1.0, 0.5, 0.5, 0.5, 0.5):
        assert a.report(m) == b.report(m)
    fresh = lr.ReduceOnPlateau(0.1)
    fresh.load_state(json.loads(json.dumps(lr.ReduceOnPlateau(0.1).state())))  # best = inf
    assert fresh.best == math.inf
    assert a.report(em.Tensor.from_data(0.1)) == b.report(0.1)  # a 0-d tensor is read


def test_bad_configuration_raises() -> None:
    with pytest.raises(em.ShapeError, match="milestones to be ints >= 0"):
        lr.MultiStep(0.1, [3, -1])
    with pytest.raises(em.ShapeError, match="anneal_strategy 'cos' or 'linear'"):
        lr.OneCycle(0.1, 10, anneal_strategy="exp")
    with pytest.raises(em.ShapeError, match="pct_start"):
        lr.OneCycle(0.1, 10, pct_start=1.5)
    with pytest.raises(em.ShapeError, match="T_mult to be an int >= 1"):
        lr.CosineAnnealingWarmRestarts(0.1, 5, 0)
    with pytest.raises(em.ShapeError, match="mode 'min' or 'max'"):
        lr.ReduceOnPlateau(0.1, mode="up")
    with pytest.raises(em.ShapeError, match="0 <= factor < 1"):
        lr.ReduceOnPlateau(0.1, factor=1.0)
    with pytest.raises(em.DTypeError, match="expected a number"):
        lr.ReduceOnPlateau(0.1).report("low")  # type: ignore[arg-type]
