"""F.instance_norm against torch in float64: values and the x / weight / bias gradients with
instance statistics and with running ones, the running statistics it returns, and its argument
errors; on every backend (this package's conftest)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember as em
from ember.nn import functional as F

from .compare import check, dev

SHAPES = [(3, 4, 7), (2, 3, 4, 5), (1, 3, 6), (2, 2, 3, 3, 2)]


def _plain(a: np.ndarray) -> em.Tensor:
    return em.tensor(a, device=dev().without_autodiff(), dtype=em.float64)


def _stats(rng: np.random.Generator, c: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(size=c), rng.uniform(0.5, 2.0, size=c)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("affine", [False, True])
def test_input_stats_match_torch(shape: tuple[int, ...], affine: bool, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    x = rng.normal(1.5, 2.0, size=shape)
    if not affine:
        check(lambda x: F.instance_norm(x)[0], lambda x: TF.instance_norm(x), x)
        return
    w, b = rng.normal(size=shape[1]), rng.normal(size=shape[1])
    check(
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-3)[0],
        lambda x, w, b: TF.instance_norm(x, weight=w, bias=b, eps=1e-3),
        x,
        w,
        b,
    )


@pytest.mark.parametrize("shape", SHAPES[:2], ids=str)
@pytest.mark.parametrize("momentum", [0.1, 0.7])
def test_running_stats_update_as_torch(
    shape: tuple[int, ...], momentum: float, node_seed: int
) -> None:
    rng = np.random.default_rng(node_seed)
    c = shape[1]
    x, (rm, rv) = rng.normal(-1.0, 3.0, size=shape), _stats(rng, c)
    w, b = rng.normal(size=c), rng.normal(size=c)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    want = TF.instance_norm(
        torch.tensor(x), trm, trv, torch.tensor(w), torch.tensor(b), True, momentum
    )
    out, new_rm, new_rv = F.instance_norm(
        _plain(x), _plain(rm), _plain(rv), _plain(w), _plain(b), True, momentum
    )
    np.testing.assert_allclose(out.to_numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    assert new_rm is not None and new_rv is not None
    # torch updates in place: the batch average of each instance's mean and unbiased variance
    np.testing.assert_allclose(new_rm.to_numpy(), trm.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(new_rv.to_numpy(), trv.numpy(), rtol=1e-12, atol=1e-14)
    assert not np.allclose(new_rv.to_numpy(), rv)  # the update moved them


def test_running_stats_carry_no_gradient(node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    x = em.tensor(rng.normal(size=(2, 3, 5)), device=dev(), dtype=em.float64).require_grad()
    rm, rv = _stats(rng, 3)
    _, new_rm, new_rv = F.instance_norm(x, _plain(rm), _plain(rv))
    assert new_rm is not None and new_rv is not None
    assert not new_rm.is_tracked() and not new_rv.is_tracked()


@pytest.mark.parametrize("shape", SHAPES[:2], ids=str)
@pytest.mark.parametrize("affine", [False, True])
def test_running_stats_in_evaluation_match_torch(
    shape: tuple[int, ...], affine: bool, node_seed: int
) -> None:
    rng = np.random.default_rng(node_seed)
    c = shape[1]
    x, (rm, rv) = rng.normal(size=shape), _stats(rng, c)
    erm, erv, trm, trv = _plain(rm), _plain(rv), torch.tensor(rm), torch.tensor(rv)
    if not affine:
        check(
            lambda x: F.instance_norm(x, erm, erv, use_input_stats=False)[0],
            lambda x: TF.instance_norm(x, trm, trv, use_input_stats=False),
            x,
        )
        return
    w, b = rng.normal(size=c), rng.normal(size=c)
    check(
        lambda x, w, b: F.instance_norm(x, erm, erv, w, b, False)[0],
        lambda x, w, b: TF.instance_norm(x, trm, trv, w, b, False),
        x,
        w,
        b,
    )
    _, same_rm, same_rv = F.instance_norm(_plain(x), erm, erv, use_input_stats=False)
    assert same_rm is erm and same_rv is erv  # unchanged


def test_errors_name_the_op() -> None:
    x = _plain(np.ones((2, 3, 4)))
    with pytest.raises(em.ShapeError, match=r"instance_norm: expected an input \(N, C"):
        F.instance_norm(_plain(np.ones(4)))
    with pytest.raises(em.ShapeError, match=r"running_mean of shape \(3,\).*got \(4,\)"):
        F.instance_norm(x, _plain(np.zeros(4)), _plain(np.ones(3)))
    with pytest.raises(em.ShapeError, match=r"weight of shape \(3,\).*got \(2,\)"):
        F.instance_norm(x, weight=_plain(np.ones(2)))
    with pytest.raises(em.ShapeError, match="use_input_stats=False, got None"):
        F.instance_norm(x, use_input_stats=False)
    with pytest.raises(em.ShapeError, match="more than 1 spatial element"):
        F.instance_norm(_plain(np.ones((2, 3, 1))))
    with pytest.raises(em.DTypeError, match="instance_norm: expected input to be a float"):
        F.instance_norm(em.tensor(np.ones((2, 3, 4), dtype=np.int64), device=dev()))
    w32 = em.tensor(np.ones(3), device=dev().without_autodiff(), dtype=em.float32)
    with pytest.raises(em.DTypeError, match="weight of the input's dtype float64, got float32"):
        F.instance_norm(x, weight=w32)
