"""Hypothesis: binary ops broadcast like NumPy, and backward sums back to each input's shape."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember as em

fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
shapes2 = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4)

BINARY: dict[str, Callable[[object, object], object]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "greater": lambda a, b: a > b,
    "lower_equal": lambda a, b: a <= b,
    "equal": lambda a, b: a == b,
}


def sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """NumPy reference: sum a broadcast gradient back to ``shape``."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


@fixture_ok
@given(shapes=shapes2, op=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_like_numpy(
    device: em.Device, shapes: hnp.BroadcastableShapes, op: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    (sa, sb), out_shape = shapes
    a = rng.integers(-3, 4, size=sa).astype(np.float64)  # small ints: ties for comparisons
    b = rng.uniform(0.5, 2.0, size=sb) * rng.choice([-1.0, 1.0], size=sb)
    ta = em.Tensor.from_data(a, device=device, dtype=em.float64)
    tb = em.Tensor.from_data(b, device=device, dtype=em.float64)
    got = BINARY[op](ta, tb)
    want = np.asarray(BINARY[op](a, b))
    assert isinstance(got, em.Tensor)
    assert got.shape == out_shape == want.shape
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-14)


@fixture_ok
@given(shapes=shapes2, op=st.sampled_from(["add", "sub", "mul", "div"]), seed=st.integers(0, 99))
def test_backward_sums_back_to_each_input_shape(
    device: em.Device, shapes: hnp.BroadcastableShapes, op: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    (sa, sb), out_shape = shapes
    a = rng.uniform(-2.0, 2.0, size=sa)
    b = rng.uniform(0.5, 2.0, size=sb)
    w = rng.normal(size=out_shape)
    ad = device.autodiff()
    ta = em.Tensor.from_data(a, device=ad, dtype=em.float64).require_grad()
    tb = em.Tensor.from_data(b, device=ad, dtype=em.float64).require_grad()
    out = BINARY[op](ta, tb)
    assert isinstance(out, em.Tensor)
    grads = (out * em.Tensor.from_data(w, device=device, dtype=em.float64)).sum().backward()
    ones = np.ones(out_shape)
    da, db = {
        "add": (ones, ones),
        "sub": (ones, -ones),
        "mul": (b * ones, a * ones),
        "div": (ones / b, -a / (b * b) * ones),
    }[op]
    ga, gb = ta.grad(grads), tb.grad(grads)
    assert ga is not None and gb is not None
    assert ga.shape == sa and gb.shape == sb
    np.testing.assert_allclose(ga.to_numpy(), sum_to(w * da, sa), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb.to_numpy(), sum_to(w * db, sb), rtol=1e-12, atol=1e-12)


@st.composite
def incompatible(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    base = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    axis = draw(st.integers(0, len(base) - 1))
    other = list(base)
    other[axis] = base[axis] + draw(st.integers(1, 3))
    return base, tuple(other)


@fixture_ok
@given(shapes=incompatible(), op=st.sampled_from(sorted(BINARY)))
def test_incompatible_shapes_raise_shape_error(
    device: em.Device, shapes: tuple[tuple[int, ...], tuple[int, ...]], op: str
) -> None:
    sa, sb = shapes
    ta = em.Tensor.ones(sa, device=device)
    tb = em.Tensor.ones(sb, device=device)
    with pytest.raises(em.ShapeError, match=rf"^{op}: shapes .* do not broadcast"):
        BINARY[op](ta, tb)
    assert ta.shape == sa and tb.shape == sb
