"""Learning-rate schedulers against torch.optim.lr_scheduler."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import pytest
import torch

from ember.errors import ShapeError
from ember.optim import lr


def _torch_rates(
    base: float, make: Callable[[torch.optim.Optimizer], object], n: int
) -> list[float]:
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SequentialLR's internal step(0) deprecation notice
        sched = make(opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()  # type: ignore[attr-defined]
    return out


def _noam(step: int) -> float:
    n = step + 1
    return 2.0 * 16**-0.5 * min(n**-0.5, n * 4**-1.5)


S = torch.optim.lr_scheduler
CASES = [
    ("constant", lambda: lr.Constant(0.1), 0.1, lambda o: S.LambdaLR(o, lambda i: 1.0), 12),
    ("linear", lambda: lr.Linear(0.1, 0.01, 10), 0.1,
     lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=10), 15),
    ("cosine", lambda: lr.CosineAnnealing(0.1, 0.001, 10), 0.1,
     lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 11),
    ("exponential", lambda: lr.Exponential(0.1, 0.9), 0.1, lambda o: S.ExponentialLR(o, 0.9), 15),
    ("step", lambda: lr.Step(0.1, 3, 0.5), 0.1, lambda o: S.StepLR(o, 3, 0.5), 15),
    ("noam", lambda: lr.Noam(16, 4, 2.0), 1.0, lambda o: S.LambdaLR(o, _noam), 12),
    ("warmup_then_cosine",
     lambda: lr.Composed([(lr.Linear(0.001, 0.1, 5), 5), (lr.CosineAnnealing(0.1, 0.0, 10), 10)]),
     0.1,
     lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.01, total_iters=5),
                                  S.CosineAnnealingLR(o, T_max=10)], milestones=[5]),
     15),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case: tuple) -> None:  # type: ignore[type-arg]
    _, make, base, make_torch, n = case
    ours = [v for _, v in zip(range(n), make())]
    theirs = _torch_rates(base, make_torch, n)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (i, a, b)


def test_state_resumes_the_schedule() -> None:
    a = lr.CosineAnnealing(1.0, 0.0, 20)
    first = [next(a) for _ in range(7)]
    b = lr.CosineAnnealing(1.0, 0.0, 20)
    b.load_state(a.state())
    assert next(b) == next(a) and len(first) == 7
    assert a.rate(20) == 0.0 and a.rate(30) == 0.0  # stays at min_lr after num_iters


def test_bad_configuration_raises() -> None:
    with pytest.raises(ShapeError, match="num_iters > 0"):
        lr.Linear(1.0, 0.0, 0)
    with pytest.raises(ShapeError, match="at least one"):
        lr.Composed([])
