"""Graph lifetime and threads (SEMANTICS.md §2, §3; issue 2's thread and memory requirements)."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import weakref

import numpy as np

import ember as em


def test_nodes_die_with_their_tensors(device: em.Device) -> None:
    x = em.Tensor.ones((4, 4), device=device.autodiff()).require_grad()
    h = x.exp()
    y = h.sin()
    rh, ry = weakref.ref(h._node), weakref.ref(y._node)  # type: ignore[arg-type]
    del h
    assert rh() is not None  # kept alive by its child y
    del y
    assert ry() is None and rh() is None  # no global registry holds them (no gc needed)


def test_consumed_graph_is_freed_when_the_loss_dies(device: em.Device) -> None:
    x = em.Tensor.ones((4, 4), device=device.autodiff()).require_grad()
    loss = (x * 2.0).tanh().sum()
    r = weakref.ref(loss._node)  # type: ignore[arg-type]
    grads = loss.backward()
    del loss
    assert r() is None
    assert x.grad(grads) is not None


def test_gradients_are_readable_from_another_thread(device: em.Device) -> None:
    x = em.Tensor.from_data([[1.0, 2.0]], device=device.autodiff(), dtype=em.float64)
    x = x.require_grad()
    grads = (x * x).sum().backward()
    seen: list[np.ndarray] = []

    def read() -> None:
        g = x.grad(grads)
        assert g is not None
        seen.append(g.to_numpy())

    t = threading.Thread(target=read)
    t.start()
    t.join()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [[2.0, 4.0]])


def _train_linear(device: em.Device, seed: int, barrier: threading.Barrier | None) -> np.ndarray:
    """Fit a linear model with plain SGD through the autodiff API; return the final weights."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(64, 5))
    ys = xs @ rng.normal(size=(5, 1)) + 0.1 * rng.normal(size=(64, 1))
    ad = device.autodiff()
    x = em.Tensor.from_data(xs, device=ad, dtype=em.float64)
    y = em.Tensor.from_data(ys, device=ad, dtype=em.float64)
    w = em.Tensor.zeros((5, 1), device=ad, dtype=em.float64).require_grad()
    b = em.Tensor.zeros((1,), device=ad, dtype=em.float64).require_grad()
    if barrier is not None:
        barrier.wait()  # all threads train at the same time
    for _ in range(60):
        err = x @ w + b - y
        grads = (err * err).mean().backward()
        gw, gb = w.grad(grads), b.grad(grads)
        assert gw is not None and gb is not None
        w = (w.inner() - gw * 0.1).autodiff().require_grad()
        b = (b.inner() - gb * 0.1).autodiff().require_grad()
    return np.concatenate([w.to_numpy().ravel(), b.to_numpy()])


def test_threads_training_independent_models_match_sequential(device: em.Device) -> None:
    n = 8
    sequential = [_train_linear(device, s, None) for s in range(n)]
    results: list[np.ndarray | None] = [None] * n
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def work(i: int) -> None:
        try:
            results[i] = _train_linear(device, i, barrier)
        except BaseException as e:  # reported below, in the main thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(n):
        r = results[i]
        assert r is not None
        np.testing.assert_array_equal(r, sequential[i])
    assert not np.array_equal(sequential[0], sequential[1])  # the models really differ


def test_forward_only_loop_on_an_autodiff_device_keeps_memory_flat(device: em.Device) -> None:
    ad = device.autodiff()
    w = em.Tensor.random((16, 8), em.Distribution.normal(0.0, 0.1), device=ad).require_grad()
    x = em.Tensor.random((32, 16), em.Distribution.normal(0.0, 1.0), device=ad)
    kept: list[float] = []  # a metric per step, like an evaluation loop
    gc.collect()
    tracemalloc.start()
    try:
        sizes = {}
        for step in range(1, 3001):
            out = (x @ w).tanh()
            kept.append(float((out * out).mean().item()))
            if step in (1000, 3000):
                sizes[step] = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # The first 1000 steps warm up: CPython's free lists (up to 2000 tuples per size, which
    # tracemalloc counts as allocated) fill there, a bounded one-off. Then 2000 leaked steps
    # would hold at least 2000 * 32 * 8 * 4 bytes of activations (~2 MB).
    growth = sizes[3000] - sizes[1000] - 2000 * 64  # allow the floats kept in ``kept``
    assert growth < 32 * 1024, f"memory grew by {growth} bytes over 2000 forward-only steps"
