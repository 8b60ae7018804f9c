"""``em.seed`` makes ``Tensor.random`` reproducible: across calls, per device, for devices first
used after the seed, and for Bernoulli masks (dropout-style creations kept as inputs)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.backend.registry import get_backend

DISTS = [
    em.Distribution.uniform(-1.0, 2.0),
    em.Distribution.normal(0.5, 2.0),
    em.Distribution.bernoulli(0.3),
]


def _draws(device: em.Device) -> list[np.ndarray]:
    return [em.Tensor.random((4, 5), d, device=device).to_numpy() for d in DISTS for _ in range(2)]


def test_seed_repeats_the_same_sequence(device: em.Device) -> None:
    em.seed(1234)
    first = _draws(device)
    em.seed(1234)
    second = _draws(device)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    # two draws after one seed differ: the generator advances
    assert not np.array_equal(first[0], first[1])
    em.seed(1235)
    assert not np.array_equal(_draws(device)[0], first[0])


def test_distributions_have_their_ranges(device: em.Device) -> None:
    em.seed(0)
    u = em.Tensor.random((2000,), DISTS[0], device=device).to_numpy()
    n = em.Tensor.random((2000,), DISTS[1], device=device, dtype=em.float64).to_numpy()
    m = em.Tensor.random((2000,), DISTS[2], device=device).to_numpy()
    assert u.min() >= -1.0 and u.max() < 2.0
    assert abs(n.mean() - 0.5) < 0.2 and abs(n.std() - 2.0) < 0.2
    assert set(np.unique(m)) <= {0.0, 1.0} and abs(m.mean() - 0.3) < 0.05
    assert em.Tensor.random((3,), DISTS[2], device=device, dtype=em.bool).dtype is em.bool


def test_each_device_keeps_its_own_stream(backend: str) -> None:
    if backend != "torch":
        pytest.skip("needs two backends")
    cpu, tch = em.Device.cpu(), em.Device.torch("cpu")
    em.seed(7)
    a_np, a_t = _draws(cpu), _draws(tch)
    em.seed(7)
    b_t, b_np = _draws(tch), _draws(cpu)  # the other order: streams don't interfere
    for x, y in zip(a_np + a_t, b_np + b_t):
        np.testing.assert_array_equal(x, y)


def test_backend_created_after_seed_is_seeded() -> None:
    em.seed(99)
    late = get_backend("numpy", "c1-late-seed-test")  # a generator that did not exist at seed
    early = get_backend("numpy", "cpu")
    em.seed(99)
    want = early.uniform((3, 4), 0.0, 1.0, em.float64)
    np.testing.assert_array_equal(late.uniform((3, 4), 0.0, 1.0, em.float64), want)


def test_bernoulli_mask_is_a_kept_creation(device: em.Device) -> None:
    # a dropout-style mask drawn once is a constant input: the same under Balanced and Disabled
    a = np.random.default_rng(0).normal(size=(3, 4))
    grads = []
    for dev in (device.autodiff(), device.autodiff().gradient_checkpointing()):
        em.seed(5)
        mask = em.Tensor.random((3, 4), em.Distribution.bernoulli(0.5), device=dev)
        assert mask.is_autodiff() and not mask.is_tracked()
        x = em.tensor(a, device=dev, dtype=em.float64).require_grad()
        y = ((x * 2.0).tanh() * mask.cast(em.float64) / 0.5).sum()
        g = x.grad(y.backward())
        assert g is not None
        grads.append(g.to_numpy())
        np.testing.assert_array_equal(g.to_numpy() == 0, mask.to_numpy() == 0)
    np.testing.assert_array_equal(grads[0], grads[1])
