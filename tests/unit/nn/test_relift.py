"""_relift: the context a parameter's new value gets back after an update."""

from __future__ import annotations

import pytest

import ember as em
from ember.nn.param import _relift

S = em.GradientCheckpointingStrategy


@pytest.mark.parametrize("strategy", [S.Disabled, S.Balanced])
@pytest.mark.parametrize("trainable", [True, False])
def test_plain_value_becomes_a_fresh_leaf(device: em.Device, strategy: S, trainable: bool) -> None:
    plain = em.Tensor.ones((2, 3), device=device)
    t = _relift(plain, strategy, trainable)
    assert t.gradient_checkpointing_strategy() is strategy
    assert t.is_require_grad() is trainable and t.is_tracked() is trainable
    assert not plain.is_autodiff()  # the input handle is unchanged
    if trainable:
        grads = (t * t).sum().backward()
        g = t.grad(grads)
        assert g is not None and g.to_numpy().tolist() == [[2.0] * 3] * 2


def test_plain_int_value_is_never_tracked(device: em.Device) -> None:
    t = _relift(em.Tensor.ones((2,), device=device, dtype=em.int64), S.Disabled, True)
    assert t.is_autodiff() and not t.is_tracked()


def test_plain_stays_plain_without_a_strategy(device: em.Device) -> None:
    plain = em.Tensor.ones((2,), device=device)
    assert _relift(plain, None, True) is plain
