"""``em.checkpoint.report``: what a graph keeps for backward, per op and in total."""

from __future__ import annotations

import tracemalloc

import numpy as np

import ember as em

Strategy = em.GradientCheckpointingStrategy


def _x(dev: em.Device, n: int = 1000) -> em.Tensor:
    return em.Tensor.from_data(np.linspace(-1, 1, n, dtype=np.float32), device=dev).require_grad()


def test_disabled_keeps_saved_values_each_buffer_once(device: em.Device) -> None:
    x = _x(device.autodiff())
    y = x.exp()  # exp keeps its output; the mul below saves the same buffer as both inputs
    loss = (y * y).sum()
    r = em.checkpoint.report(loss)
    assert r.by_op == {"exp": 4000}
    assert r.total_bytes == 4000
    assert r.leaf_bytes == 4000
    assert (r.num_nodes, r.num_recipes) == (3, 0)


def test_balanced_keeps_recipes_only(device: em.Device) -> None:
    x = _x(device.autodiff().gradient_checkpointing())
    loss = (x.exp() * x.exp()).sum()
    r = em.checkpoint.report(loss)
    # the exps and the product are recipes on the leaf; the sum's rule reads no value, so no
    # child asks for its output and the graph holds nothing beyond the leaf
    assert r.by_op == {} and r.total_bytes == 0
    assert (r.num_nodes, r.num_recipes) == (4, 3)


def test_constants_and_views(device: em.Device) -> None:
    dev = device.autodiff()
    w = em.Tensor.from_data(np.ones((16, 16), np.float32), device=dev).require_grad()
    mask = em.Tensor.random((4, 4, 4), em.Distribution.bernoulli(0.5), device=dev)
    m = (w @ w).reshape((4, 4, 16)).permute((1, 0, 2))
    loss = ((m @ m.swap_dims(1, 2)) * mask).sum()
    r = em.checkpoint.report(loss)
    # the two matmul inputs are views of one (16, 16) buffer: counted once, as its producer's
    assert r.by_op["permute"] == 16 * 16 * 4
    assert r.by_op["constant"] == 4 * 4 * 4 * 4  # the mask
    assert r.total_bytes == sum(r.by_op.values())
    assert list(r.by_op.values()) == sorted(r.by_op.values(), reverse=True)


def test_empty_for_plain_untracked_and_consumed(device: em.Device) -> None:
    plain = em.Tensor.ones((3,), device=device)
    assert em.checkpoint.report(plain).total_bytes == 0
    assert em.checkpoint.report(plain.autodiff()).num_nodes == 0
    x = _x(device.autodiff())
    loss = (x.exp() * x).sum()
    assert em.checkpoint.report(loss).total_bytes > 0
    loss.backward()
    r = em.checkpoint.report(loss)
    assert (r.total_bytes, r.num_nodes, r.by_op) == (0, 0, {})


def test_str_is_a_readable_table(device: em.Device) -> None:
    x = _x(device.autodiff())
    r = em.checkpoint.report((x.exp() * x.sin()).sum())
    text = str(r)
    assert text.splitlines()[0].startswith("graph keeps ")
    assert "exp" in text and "KiB" in text and "%" in text


def test_matches_traced_memory_after_forward() -> None:
    """On the NumPy backend the report accounts for what the forward left allocated."""
    for strategy in Strategy:
        dev = em.Device.cpu().autodiff()
        if strategy is Strategy.Balanced:
            dev = dev.gradient_checkpointing()
        rng = np.random.default_rng(0)
        w = em.Tensor.from_data(rng.normal(size=(256, 256)).astype(np.float32), device=dev)
        w = w.require_grad()
        data = rng.normal(size=(64, 256)).astype(np.float32)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            h = em.Tensor.from_data(data, device=dev)  # a constant the first matmul saves
            for _ in range(6):
                h = ((h @ w) * 0.05).tanh().exp() - 1.0
            loss = (h * h).mean()
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        r = em.checkpoint.report(loss)
        assert r.total_bytes > 0
        # graph objects (nodes, tuples, dicts) add a little on top of the arrays
        assert r.total_bytes <= held <= r.total_bytes * 1.05 + 64 * 1024, (strategy, held, r)
