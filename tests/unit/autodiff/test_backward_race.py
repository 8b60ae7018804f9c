"""Concurrent ``backward()`` on one graph is atomic (SEMANTICS.md §3; issue 12, item 4).

Two threads released together by a barrier race through the same graph: exactly one pass runs,
the other gets ``AutodiffError`` before changing anything. A tiny GIL switch interval makes the
threads interleave inside the pass, where the race used to give raw ``TypeError``s and double
executions.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

import ember as em
from ember.autodiff import engine

Strategy = em.GradientCheckpointingStrategy
RACES = 200
DEPTH = 12


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Let the interpreter switch threads every microsecond, so the passes interleave."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _chain(device: em.Device, strategy: Strategy) -> tuple[em.Tensor, em.Tensor]:
    data = np.linspace(-1.0, 1.0, 16).reshape(4, 4)
    x = em.Tensor.from_data(data, device=device.autodiff(), dtype=em.float64)
    x = x.with_gradient_checkpointing_strategy(strategy).require_grad()
    h = x
    for _ in range(DEPTH):
        h = (h * 1.01).tanh()
    return x, h.sum()


def _expected_grad(x: em.Tensor) -> np.ndarray:
    """The chain's gradient computed by hand in float64."""
    h = x.to_numpy()
    g = np.ones_like(h)
    stack = []
    for _ in range(DEPTH):
        h = np.tanh(h * 1.01)
        stack.append(h)
    for t in reversed(stack):
        g = g * (1.0 - t * t) * 1.01
    return g


def _race(loss: em.Tensor) -> tuple[list[str], list[em.Gradients]]:
    barrier = threading.Barrier(2)
    outcomes: list[str] = []
    grads: list[em.Gradients] = []

    def go() -> None:
        barrier.wait()
        try:
            grads.append(loss.backward())
            outcomes.append("ok")
        except em.AutodiffError:
            outcomes.append("AutodiffError")
        except Exception as e:  # any other exception is the bug this test catches
            outcomes.append(type(e).__name__)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes, grads


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_two_threads_racing_on_one_graph_give_one_pass_and_one_autodiff_error(
    device: em.Device, strategy: Strategy, fast_switching: None
) -> None:
    seen: Counter[tuple[str, ...]] = Counter()
    for _ in range(RACES):
        x, loss = _chain(device, strategy)
        outcomes, grads = _race(loss)
        seen[tuple(sorted(outcomes))] += 1
        if len(grads) == 1:
            g = x.grad(grads[0])
            assert g is not None
            np.testing.assert_allclose(g.to_numpy(), _expected_grad(x), rtol=1e-12)
    assert seen == Counter({("AutodiffError", "ok"): RACES})
    assert not engine._claims  # every claim was given back


def _concurrent_grads(x: em.Tensor, losses: list[em.Tensor]) -> list[np.ndarray]:
    """Run each loss's backward in its own thread, all released together; ``x``'s gradients."""
    barrier = threading.Barrier(len(losses))
    results: list[np.ndarray] = []

    def go(loss: em.Tensor) -> None:
        barrier.wait()
        g = x.grad(loss.backward())
        if g is not None:
            results.append(g.to_numpy())

    threads = [threading.Thread(target=go, args=(loss,)) for loss in losses]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_independent_graphs_on_shared_leaves_run_concurrently(
    device: em.Device, fast_switching: None
) -> None:
    data = np.linspace(-1.0, 1.0, 16).reshape(4, 4)
    x = em.Tensor.from_data(data, device=device.autodiff(), dtype=em.float64).require_grad()
    t = np.tanh(data * 1.01)
    for _ in range(50):
        losses = [(x * 1.01).tanh().sum(), (x * 1.01).tanh().sum()]
        results = _concurrent_grads(x, losses)
        assert len(results) == 2
        for r in results:
            np.testing.assert_allclose(r, (1.0 - t * t) * 1.01, rtol=1e-12)
    assert not engine._claims


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_a_claim_failing_midway_leaves_the_graph_unconsumed(
    device: em.Device, strategy: Strategy
) -> None:
    x, loss = _chain(device, strategy)
    node = loss._node
    assert node is not None
    middle = node
    for _ in range(DEPTH):  # walk down to a node the pass reaches after claiming the top half
        parent = middle.parents[0]
        assert parent is not None
        middle = parent
    engine._claims[middle] = object()  # as if another pass held it
    try:
        with pytest.raises(em.AutodiffError, match=r"backward.*another backward.*running"):
            loss.backward()
    finally:
        del engine._claims[middle]
    assert not engine._claims  # the claims taken before the failure were given back
    g = x.grad(loss.backward())  # nothing was consumed: the pass still runs, once
    assert g is not None
    np.testing.assert_allclose(g.to_numpy(), _expected_grad(x), rtol=1e-12)
    with pytest.raises(em.AutodiffError, match="already consumed"):
        loss.backward()
    assert not engine._claims
