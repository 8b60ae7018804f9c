"""Class ``weight=`` of F.cross_entropy and F.nll_loss against torch in float64: values and the
input / weight gradients, with ignore_index, label_smoothing and every reduction, on every
backend (this package's conftest)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember as em
from ember.nn import functional as F

from .compare import check, dev


def _w(w: np.ndarray) -> tuple[em.Tensor, torch.Tensor]:
    """The weight as a constant of each side (torch takes no gradient for it)."""
    return em.tensor(w, device=dev(), dtype=em.float64), torch.tensor(w)


SHAPES = [((6, 4), (6,)), ((3, 5, 2, 3), (3, 2, 3)), ((4,), ())]


def _data(
    seed: int, xs: tuple[int, ...], ts: tuple[int, ...], ignore: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = xs[0] if len(xs) == 1 else xs[1]
    x = rng.normal(size=xs)
    t = rng.integers(0, c, size=ts).astype(np.int64)
    if ignore and t.ndim:
        t.reshape(-1)[0] = 1  # the ignored label is a real class: its rows must drop out
    w = rng.uniform(0.2, 2.0, size=(c,))
    return x, t, w


@pytest.mark.parametrize(("xs", "ts"), SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("ignore", [False, True])
def test_cross_entropy_weight(
    xs: tuple[int, ...],
    ts: tuple[int, ...],
    reduction: str,
    smoothing: float,
    ignore: bool,
    node_seed: int,
) -> None:
    x, t, w = _data(node_seed, xs, ts, ignore)
    kw = {
        "reduction": reduction,
        "label_smoothing": smoothing,
        "ignore_index": 1 if ignore else -100,
    }
    we, wt = _w(w)
    check(
        lambda x, t: F.cross_entropy(x, t, we, **kw),
        lambda x, t: TF.cross_entropy(x, t, wt, **kw),
        x,
        t,
    )


@pytest.mark.parametrize(("xs", "ts"), SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", [False, True])
def test_nll_loss_weight(
    xs: tuple[int, ...], ts: tuple[int, ...], reduction: str, ignore: bool, node_seed: int
) -> None:
    x, t, w = _data(node_seed, xs, ts, ignore)
    kw = {"reduction": reduction, "ignore_index": 1 if ignore else -100}
    we, wt = _w(w)
    check(
        lambda x, t: F.nll_loss(x, t, we, **kw),
        lambda x, t: TF.nll_loss(x, t, wt, **kw),
        x,
        t,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_weight_probabilities(
    reduction: str, smoothing: float, node_seed: int
) -> None:
    rng = np.random.default_rng(node_seed)
    x, p, w = rng.normal(size=(5, 4)), rng.dirichlet(np.ones(4), size=5), rng.uniform(0.2, 2, 4)
    kw = {"reduction": reduction, "label_smoothing": smoothing}
    we, wt = _w(w)
    check(
        lambda x, p: F.cross_entropy(x, p, we, **kw),
        lambda x, p: TF.cross_entropy(x, p, wt, **kw),
        x,
        p,
    )


def test_weight_shape_is_checked() -> None:
    x, t = em.Tensor.zeros((2, 3)), em.tensor([0, 2])
    with pytest.raises(
        em.ShapeError, match=r"cross_entropy: expected a per-class weight of shape \(3,\)"
    ):
        F.cross_entropy(x, t, em.Tensor.ones((4,)))
    with pytest.raises(em.ShapeError, match=r"nll_loss: expected a per-class weight"):
        F.nll_loss(x, t, em.Tensor.ones((3, 1)))
    with pytest.raises(em.DTypeError, match="nll_loss: expected weight to be a float tensor"):
        F.nll_loss(x, t, em.tensor([1, 2, 3]))
