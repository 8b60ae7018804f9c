"""Hypothesis: reshape / permute / transpose / swap_dims round trips, forward and backward."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember as em

fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def leaf(device: em.Device, a: np.ndarray) -> em.Tensor:
    return em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64).require_grad()


@fixture_ok
@given(shape=shapes, data=st.data())
def test_permute_round_trip(device: em.Device, shape: tuple[int, ...], data: st.DataObject) -> None:
    perm = data.draw(st.permutations(range(len(shape))))
    inverse = list(np.argsort(perm))
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    x = leaf(device, a)
    p = x.permute(perm)
    np.testing.assert_array_equal(p.to_numpy(), a.transpose(perm))
    back = p.permute(inverse)
    np.testing.assert_array_equal(back.to_numpy(), a)
    w = np.random.default_rng(0).normal(size=p.shape)
    grads = (p * em.Tensor.from_data(w, device=device, dtype=em.float64)).sum().backward()
    g = x.grad(grads)
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), w.transpose(inverse))


@fixture_ok
@given(shape=shapes, data=st.data())
def test_reshape_round_trip(device: em.Device, shape: tuple[int, ...], data: st.DataObject) -> None:
    n = int(np.prod(shape))
    # a random factorisation of n, with one size left to -1
    sizes, rest = [], n
    for _ in range(data.draw(st.integers(0, 3))):
        d = data.draw(st.sampled_from([k for k in range(1, rest + 1) if rest % k == 0]))
        sizes.append(d)
        rest //= d
    target = (*sizes, -1)
    a = np.arange(n, dtype=np.float64).reshape(shape)
    x = leaf(device, a)
    r = x.reshape(target)
    assert r.shape == (*sizes, rest)
    np.testing.assert_array_equal(r.to_numpy(), a.reshape(target))
    back = r.reshape(shape)
    np.testing.assert_array_equal(back.to_numpy(), a)
    flat = x.flatten()
    assert flat.shape == (n,)
    grads = (back * back).sum().backward()
    g = x.grad(grads)
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), 2.0 * a)


@fixture_ok
@given(shape=hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=4), data=st.data())
def test_transpose_and_swap_dims_are_involutions(
    device: em.Device, shape: tuple[int, ...], data: st.DataObject
) -> None:
    a = np.random.default_rng(1).normal(size=shape)
    x = em.Tensor.from_data(a, device=device, dtype=em.float64)
    t = x.transpose()
    np.testing.assert_array_equal(t.to_numpy(), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(t.transpose().to_numpy(), a)
    i = data.draw(st.integers(-len(shape), len(shape) - 1))
    j = data.draw(st.integers(-len(shape), len(shape) - 1))
    s = x.swap_dims(i, j)
    np.testing.assert_array_equal(s.to_numpy(), np.swapaxes(a, i, j))
    np.testing.assert_array_equal(s.swap_dims(i, j).to_numpy(), a)


@fixture_ok
@given(shape=shapes, data=st.data())
def test_unsqueeze_squeeze_round_trip(
    device: em.Device, shape: tuple[int, ...], data: st.DataObject
) -> None:
    d = data.draw(st.integers(-len(shape) - 1, len(shape)))
    a = np.random.default_rng(2).normal(size=shape)
    x = em.Tensor.from_data(a, device=device, dtype=em.float64)
    u = x.unsqueeze_dim(d)
    np.testing.assert_array_equal(u.to_numpy(), np.expand_dims(a, d))
    np.testing.assert_array_equal(u.squeeze_dim(d).to_numpy(), a)
