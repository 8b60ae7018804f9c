"""Placeholder constants of nn.functional (the 0-d "none" operand, bias-less vectors) are cached."""

from __future__ import annotations

import numpy as np

import ember as em
import ember.nn.functional as F
from ember.nn.functional import _none_operand


def test_none_operand_is_made_once_per_device_and_dtype(device: em.Device) -> None:
    a = em.Tensor.zeros((2, 3), device=device.autodiff())
    b = em.Tensor.ones((4,), device=device)
    assert _none_operand(a) is _none_operand(b)
    assert _none_operand(a).shape == () and _none_operand(a).item() == 0.0
    c = em.Tensor.zeros((2,), device=device, dtype=em.float64)
    assert _none_operand(c) is not _none_operand(a)
    assert _none_operand(c).dtype is em.float64
    assert not _none_operand(a).is_autodiff()


def test_attention_with_the_shared_operand_keeps_its_gradients(device: em.Device) -> None:
    rng = np.random.default_rng(0)
    ad = device.autodiff()
    q, k, v = (
        em.Tensor.from_data(rng.normal(size=(1, 2, 4, 8)), device=ad).require_grad()
        for _ in range(3)
    )
    first = F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    again = F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    for t in (q, k, v):
        np.testing.assert_array_equal(t.grad(first).to_numpy(), t.grad(again).to_numpy())


def test_vector_constants_are_cached_and_larger_ones_are_not(device: em.Device) -> None:
    from ember.nn.functional import _const

    a = em.Tensor.zeros((2, 3), device=device)
    assert _const(a, (3,), 1.0) is _const(a, (3,), 1.0)
    assert _const(a, (3,), 1.0) is not _const(a, (3,), 0.0)
    assert _const(a, (2, 3), 0.0) is not _const(a, (2, 3), 0.0)
    assert np.isnan(_const(a, (), float("nan")).item())
