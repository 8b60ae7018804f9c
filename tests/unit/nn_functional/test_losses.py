"""Losses of ``em.nn.functional`` against ``torch.nn.functional``: values, gradients, reductions,
ignore_index, label smoothing, probability targets, and clear errors for bad targets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember as em
from ember.nn import functional as F

from .compare import check, dev

REDUCTIONS = ["mean", "sum", "none"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    ("xs", "kw"),
    [
        ((6, 5), {}),
        ((6, 5), {"label_smoothing": 0.1}),
        ((6, 5), {"ignore_index": 2}),
        ((6, 5), {"ignore_index": 1, "label_smoothing": 0.3}),
        ((2, 4, 3, 2), {}),
        ((2, 4, 3), {"ignore_index": 0, "label_smoothing": 0.2}),
        ((5,), {}),
    ],
)
def test_cross_entropy_class_indices(
    xs: Any, kw: dict[str, Any], reduction: str, rng: np.random.Generator
) -> None:
    x = rng.normal(size=xs) * 3
    tshape = () if len(xs) == 1 else (xs[0], *xs[2:])
    c = xs[0] if len(xs) == 1 else xs[1]
    t = rng.integers(0, c, size=tshape)
    check(
        lambda x, t: F.cross_entropy(x, t, reduction=reduction, **kw),
        lambda x, t: TF.cross_entropy(x, t, reduction=reduction, **kw),
        x,
        t,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
@pytest.mark.parametrize("xs", [(4, 5), (2, 3, 4)])
def test_cross_entropy_probabilities(
    xs: Any, smoothing: float, reduction: str, rng: np.random.Generator
) -> None:
    x = rng.normal(size=xs)
    p = rng.uniform(size=xs)
    p /= p.sum(axis=1, keepdims=True)
    check(
        lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=smoothing),
        lambda x, p: TF.cross_entropy(x, p, reduction=reduction, label_smoothing=smoothing),
        x,
        p,
    )


def test_cross_entropy_float32_large_batch(rng: np.random.Generator) -> None:
    x = rng.normal(size=(512, 300)) * 4
    t = rng.integers(0, 300, size=(512,))
    check(F.cross_entropy, TF.cross_entropy, x, t, dtype="float32", rtol=1e-5, atol=1e-7)
    check(
        lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, ignore_index=7),
        lambda x, t: TF.cross_entropy(x, t, label_smoothing=0.1, ignore_index=7),
        x,
        t,
        dtype="float32",
        rtol=1e-5,
        atol=1e-7,
    )


def test_cross_entropy_all_ignored_is_nan() -> None:
    loss = F.cross_entropy(em.Tensor.zeros((2, 3)), em.tensor([1, 1]), ignore_index=1)
    assert np.isnan(loss.item())


def test_cross_entropy_docstring_value() -> None:
    loss = F.cross_entropy(em.Tensor.zeros((2, 3)), em.tensor([0, 2]))
    assert abs(loss.item() - np.log(3)) < 1e-6


def test_cross_entropy_bad_targets() -> None:
    x = em.Tensor.zeros((4, 3))
    with pytest.raises(em.ShapeError, match=r"cross_entropy: index 3 is out of range.*\[0, 3\)"):
        F.cross_entropy(x, em.tensor([0, 1, 3, 2]))
    with pytest.raises(em.ShapeError, match="index -1 is out of range"):
        F.cross_entropy(x, em.tensor([0, -1, 1, 2]))
    with pytest.raises(em.DTypeError, match="expected int class indices, got a float32 target"):
        F.cross_entropy(x, em.tensor([0.0, 1.0, 2.0, 1.0]))
    with pytest.raises(em.DTypeError, match="expected int class indices, got a bool"):
        F.cross_entropy(x, em.tensor([True, False, True, True]))
    with pytest.raises(em.ShapeError, match=r"expected class indices of shape \(4,\)"):
        F.cross_entropy(x, em.tensor([0, 1]))
    with pytest.raises(em.ShapeError, match="expected reduction"):
        F.cross_entropy(x, em.tensor([0, 1, 2, 1]), reduction="avg")
    with pytest.raises(em.DTypeError, match="expected input to be a float"):
        F.cross_entropy(em.tensor([[1, 2]]), em.tensor([0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction: str, rng: np.random.Generator) -> None:
    x = np.log(rng.dirichlet(np.ones(4), size=6))
    t = rng.integers(0, 4, size=(6,))
    check(
        lambda x, t: F.nll_loss(x, t, reduction=reduction),
        lambda x, t: TF.nll_loss(x, t, reduction=reduction),
        x,
        t,
    )
    check(
        lambda x, t: F.nll_loss(x, t, ignore_index=int(t[0]), reduction=reduction),
        lambda x, t: TF.nll_loss(x, t, ignore_index=int(t[0]), reduction=reduction),
        x,
        t,
    )
    x3 = rng.normal(size=(2, 4, 3))
    t3 = rng.integers(0, 4, size=(2, 3))
    check(
        lambda x, t: F.nll_loss(x, t, reduction=reduction),
        lambda x, t: TF.nll_loss(x, t, reduction=reduction),
        x3,
        t3,
    )
    with pytest.raises(em.DTypeError, match="nll_loss: expected int class indices"):
        F.nll_loss(em.tensor(x), em.tensor(x))


def test_log_softmax_plus_nll_equals_cross_entropy(rng: np.random.Generator) -> None:
    x = em.tensor(rng.normal(size=(5, 7)))
    t = em.tensor(rng.integers(0, 7, size=(5,)))
    a = F.nll_loss(F.log_softmax(x, 1), t).item()
    assert abs(a - F.cross_entropy(x, t).item()) < 1e-6


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction: str, rng: np.random.Generator) -> None:
    x, t = rng.normal(size=(4, 5)) * 2, rng.normal(size=(4, 5))
    check(
        lambda x, t: F.mse_loss(x, t, reduction=reduction),
        lambda x, t: TF.mse_loss(x, t, reduction=reduction),
        x,
        t,
    )
    check(
        lambda x, t: F.l1_loss(x, t, reduction=reduction),
        lambda x, t: TF.l1_loss(x, t, reduction=reduction),
        x,
        t,
    )
    for beta in (1.0, 0.5, 0.0):
        check(
            lambda x, t, beta=beta: F.smooth_l1_loss(x, t, reduction=reduction, beta=beta),
            lambda x, t, beta=beta: TF.smooth_l1_loss(x, t, reduction=reduction, beta=beta),
            x,
            t,
        )
    for delta in (1.0, 0.3):
        check(
            lambda x, t, delta=delta: F.huber_loss(x, t, reduction=reduction, delta=delta),
            lambda x, t, delta=delta: TF.huber_loss(x, t, reduction=reduction, delta=delta),
            x,
            t,
        )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction: str, rng: np.random.Generator) -> None:
    p, t, w = rng.uniform(0.02, 0.98, size=(3, 4)), rng.uniform(size=(3, 4)), rng.uniform(size=(4,))
    check(
        lambda p, t: F.binary_cross_entropy(p, t, reduction=reduction),
        lambda p, t: TF.binary_cross_entropy(p, t, reduction=reduction),
        p,
        t,
    )
    check(
        lambda p, t: F.binary_cross_entropy(
            p, t, em.tensor(w, device=dev(), dtype=em.float64), reduction
        ),
        lambda p, t: TF.binary_cross_entropy(p, t, torch.tensor(w), reduction=reduction),
        p,
        t,
    )


def test_binary_cross_entropy_saturated_probabilities() -> None:
    p, t = np.array([0.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0, 0.0])
    check(F.binary_cross_entropy, TF.binary_cross_entropy, p, t, grad=False)
    with pytest.raises(em.ShapeError, match=r"expected input probabilities in \[0, 1\]"):
        F.binary_cross_entropy(em.tensor([1.5, 0.5]), em.tensor([1.0, 0.0]))
    with pytest.raises(em.ShapeError, match="target of the input's shape"):
        F.binary_cross_entropy(em.tensor([0.5, 0.5]), em.tensor([1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction: str, rng: np.random.Generator) -> None:
    x, t = rng.normal(size=(3, 4)) * 5, rng.uniform(size=(3, 4))
    pw, w = rng.uniform(0.5, 3, size=(4,)), rng.uniform(size=(3, 1))
    check(
        lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=reduction),
        lambda x, t: TF.binary_cross_entropy_with_logits(x, t, reduction=reduction),
        x,
        t,
    )
    check(
        lambda x, t: F.binary_cross_entropy_with_logits(
            x,
            t,
            em.tensor(w, device=dev(), dtype=em.float64),
            reduction,
            pos_weight=em.tensor(pw, device=dev(), dtype=em.float64),
        ),
        lambda x, t: TF.binary_cross_entropy_with_logits(
            x, t, torch.tensor(w), reduction=reduction, pos_weight=torch.tensor(pw)
        ),
        x,
        t,
    )


def test_bce_with_logits_at_zero_and_extremes() -> None:
    # sigmoid'(0) = 1/2: a zero logit must give the gradient 0.5 - t
    x = np.array([0.0, 0.0, 100.0, -100.0, 1e4])
    t = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    check(
        F.binary_cross_entropy_with_logits,
        TF.binary_cross_entropy_with_logits,
        x,
        t,
        dtype="float32",
        rtol=1e-6,
        atol=1e-6,
    )


def test_cross_entropy_extreme_logits_take_the_shifted_path() -> None:
    # rows whose exp over- or underflows are recomputed with the max shift
    x = np.array([[1e4, 0.0, -1e4], [-200.0, -210.0, -205.0], [90.0, 89.0, 0.0], [1.0, 2.0, 3.0]])
    t = np.array([1, 0, 2, 2])
    check(F.cross_entropy, TF.cross_entropy, x, t, dtype="float32", rtol=1e-6, atol=1e-6)
    check(
        lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
        lambda x, t: TF.cross_entropy(x, t, label_smoothing=0.1),
        x,
        t,
        dtype="float32",
        rtol=1e-6,
        atol=1e-6,
    )
