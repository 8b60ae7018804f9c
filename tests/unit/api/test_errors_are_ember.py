"""Misuse of modules, optimizers and creation raises ember errors (STYLE.md §7), not bare ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import ember as em

T = em.Tensor


def _model() -> em.nn.Module:
    return em.nn.Linear(2, 3, device=em.Device.cpu().autodiff())


TYPE_CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "creation device str": (
        lambda: T.zeros((2,), device="cpu"),
        r"^device: expected an em\.Device",
    ),
    "layer device str": (lambda: em.nn.Linear(2, 3, device="cpu"), r"expected an em\.Device"),
    "Param of a list": (lambda: em.nn.Param([1.0]), r"^Param: expected an em\.Tensor"),
    "buffer of a list": (
        lambda: em.nn.Module().register_buffer("b", [1.0]),
        r"^register_buffer: expected a Tensor",
    ),
    "ModuleDict value": (
        lambda: em.nn.ModuleDict({"a": 3}),
        r"^ModuleDict: expected a Module for 'a'",
    ),
    "step with a dict": (
        lambda: em.optim.SGD().step(0.1, _model(), {}),
        r"^step: expected GradientsParams, got dict",
    ),
    "from_grads with a dict": (
        lambda: em.optim.GradientsParams.from_grads({}, _model()),
        r"^GradientsParams\.from_grads: expected the Gradients returned by loss\.backward\(\)",
    ),
}


@pytest.mark.parametrize("case", sorted(TYPE_CASES))
def test_wrong_types_raise_dtype_error(case: str) -> None:
    call, pattern = TYPE_CASES[case]
    with pytest.raises(em.DTypeError, match=pattern):
        call()


def test_param_attribute_given_a_tensor_raises_dtype_error() -> None:
    m = _model()
    with pytest.raises(em.DTypeError, match=r"^Linear\.weight: expected a Param, got a Tensor"):
        m.weight = T.zeros((3, 2))  # type: ignore[assignment]


HYPER_CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "Adam beta1": (lambda: em.optim.Adam(betas=(1.5, 0.999)), r"^Adam: expected 0 <= betas\[0\]"),
    "Adam beta2": (lambda: em.optim.Adam(betas=(0.9, -0.1)), r"^Adam: expected 0 <= betas\[1\]"),
    "Adam beta1 = 1": (lambda: em.optim.Adam(betas=(1.0, 0.9)), r"betas\[0\] < 1, got 1\.0"),
    "AdamW eps": (lambda: em.optim.AdamW(eps=-1.0), r"^AdamW: expected eps >= 0"),
    "Adam weight_decay": (
        lambda: em.optim.Adam(weight_decay=-0.1),
        r"^Adam: expected weight_decay >= 0",
    ),
    "SGD momentum": (lambda: em.optim.SGD(momentum=-0.9), r"^SGD: expected momentum >= 0"),
    "SGD weight_decay": (
        lambda: em.optim.SGD(weight_decay=-1e-4),
        r"^SGD: expected weight_decay >= 0",
    ),
    "RMSProp alpha": (lambda: em.optim.RMSProp(alpha=1.5), r"^RMSProp: expected 0 <= alpha <= 1"),
    "RMSProp momentum": (
        lambda: em.optim.RMSProp(momentum=-1.0),
        r"^RMSProp: expected momentum >= 0",
    ),
    "AdaGrad lr_decay": (lambda: em.optim.AdaGrad(lr_decay=-1.0), r"^AdaGrad: expected lr_decay"),
    "AdaGrad initial": (
        lambda: em.optim.AdaGrad(initial_accumulator_value=-1.0),
        r"^AdaGrad: expected initial_accumulator_value >= 0",
    ),
}


@pytest.mark.parametrize("case", sorted(HYPER_CASES))
def test_invalid_hyperparameters_raise(case: str) -> None:
    call, pattern = HYPER_CASES[case]
    with pytest.raises(em.ShapeError, match=pattern):
        call()


def test_valid_hyperparameters_are_kept() -> None:
    adam = em.optim.Adam(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    assert (adam.beta1, adam.beta2, adam.eps, adam.weight_decay) == (0.8, 0.99, 1e-6, 0.1)
    sgd = em.optim.SGD(momentum=0.9, nesterov=True, weight_decay=1e-4)
    assert (sgd.momentum, sgd.nesterov, sgd.weight_decay) == (0.9, True, 1e-4)
    assert em.optim.RMSProp(alpha=0.9, momentum=0.5).alpha == 0.9
    assert em.optim.AdaGrad(lr_decay=0.01).lr_decay == 0.01
