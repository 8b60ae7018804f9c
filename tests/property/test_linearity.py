"""Hypothesis: gradients are linear in the loss (add and mul by constants)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember as em

fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
scalars = st.floats(-3.0, 3.0, allow_nan=False).filter(lambda v: abs(v) > 1e-3)
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def grad(device: em.Device, a: np.ndarray, loss_of: object) -> np.ndarray:
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64).require_grad()
    loss = loss_of(x)  # type: ignore[operator]
    g = x.grad(loss.backward())
    assert g is not None
    return g.to_numpy()


def f(x: em.Tensor) -> em.Tensor:
    return (x.sin() * x).sum()


def g(x: em.Tensor) -> em.Tensor:
    return (x.exp() + x * x).mean()


@fixture_ok
@given(shape=shapes, alpha=scalars, beta=scalars, seed=st.integers(0, 99))
def test_gradient_of_a_linear_combination(
    device: em.Device, shape: tuple[int, ...], alpha: float, beta: float, seed: int
) -> None:
    a = np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)
    gf = grad(device, a, f)
    gg = grad(device, a, g)
    combined = grad(device, a, lambda x: f(x) * alpha + g(x) * beta)
    np.testing.assert_allclose(combined, alpha * gf + beta * gg, rtol=1e-12, atol=1e-12)


@fixture_ok
@given(shape=shapes, alpha=scalars, seed=st.integers(0, 99))
def test_scaling_the_loss_scales_the_gradient(
    device: em.Device, shape: tuple[int, ...], alpha: float, seed: int
) -> None:
    a = np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)
    base = grad(device, a, f)
    for scaled in (lambda x: f(x) * alpha, lambda x: alpha * f(x), lambda x: f(x) / (1 / alpha)):
        np.testing.assert_allclose(grad(device, a, scaled), alpha * base, rtol=1e-12, atol=1e-12)


@fixture_ok
@given(shape=shapes, seed=st.integers(0, 99))
def test_gradient_of_a_sum_of_losses_is_the_sum_of_gradients(
    device: em.Device, shape: tuple[int, ...], seed: int
) -> None:
    a = np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)
    both = grad(device, a, lambda x: f(x) + g(x))
    np.testing.assert_allclose(both, grad(device, a, f) + grad(device, a, g), rtol=1e-12)
