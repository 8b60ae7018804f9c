"""The Balanced strategy's mechanism (SEMANTICS.md §7): what is kept, what is recomputed, when."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers.sampling import run_row, runtime_attrs, sample_cases, to_tensors

import ember as em
from ember.checkpoint import recompute
from ember.checkpoint.record import MAX_CHAIN
from ember.ops.registry import OPS, OpSpec

Strategy = em.GradientCheckpointingStrategy
DIFFERENTIABLE = [s for s in OPS.values() if s.differentiable]


def _dev(device: em.Device, strategy: Strategy) -> em.Device:
    d = device.autodiff()
    return d.gradient_checkpointing() if strategy is Strategy.Balanced else d


def _leaf(a: np.ndarray, dev: em.Device) -> em.Tensor:
    return em.Tensor.from_data(a, device=dev).require_grad()


class _Probe:
    """Wraps ``checkpoint.recompute.Recompute`` to record the cache after every step of one
    backward (the engine builds its value provider from that module attribute)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.final: list[int] = []
        probe = self
        base = recompute.Recompute

        class Recording(base):  # type: ignore[misc, valid-type]
            __slots__ = ()

            def step(self, n: Any, g: Any) -> Any:
                out = super().step(n, g)
                probe.sizes.append(len(self.cache))
                return out

            def skip(self, n: Any) -> None:
                super().skip(n)
                probe.sizes.append(len(self.cache))

        monkeypatch.setattr(recompute, "Recompute", Recording)


def _grads(
    device: em.Device, strategy: Strategy, build: Callable[[em.Device], tuple[Any, list[Any]]]
) -> tuple[list[np.ndarray], em.Gradients]:
    loss, leaves = build(_dev(device, strategy))
    grads = loss.backward()
    out = []
    for leaf in leaves:
        g = leaf.grad(grads)
        assert g is not None
        out.append(g.to_numpy())
    return out, grads


def _assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)  # bit for bit: same backend, same dtype


def _chain(n_ops: int) -> Callable[[em.Device], tuple[Any, list[Any]]]:
    def build(dev: em.Device) -> tuple[Any, list[Any]]:
        x = _leaf(np.linspace(-0.5, 0.5, 16, dtype=np.float32), dev)
        y = x
        for i in range(n_ops):
            k = i % 4
            if k == 0:
                y = y.exp()
            elif k == 1:
                y = y * 1.001
            elif k == 2:
                y = y.log()
            else:
                y = y - 0.0005
        return y.sum(), [x]

    return build


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
def test_10000_op_chain_runs_without_recursion(device: em.Device, strategy: Strategy) -> None:
    build = _chain(10_000)
    loss, leaves = build(_dev(device, strategy))
    report = em.checkpoint.report(loss)
    assert report.num_nodes == 10_001
    grads = loss.backward()
    g = leaves[0].grad(grads)
    assert g is not None and np.isfinite(g.to_numpy()).all()
    if strategy is Strategy.Balanced:
        # every op but the sum is a recipe, except one value kept in each MAX_CHAIN along the
        # chain (the op whose child would pass MAX_CHAIN recipes in a row: recompute chains stay
        # short); each recipe whose value some step reads is recomputed exactly once (a recipe
        # feeding only a kept exp, whose rule reads its own output, is never asked for)
        kept = (10_000 - 1) // MAX_CHAIN
        assert report.num_recipes == 10_000 - kept
        assert 0.85 * report.num_recipes <= len(grads.recomputed) <= report.num_recipes
        assert set(grads.recomputed.values()) == {1}
    else:
        assert grads.recomputed == {}
    del loss  # freeing a 10k-deep graph must not overflow the C stack either


def test_each_recomputed_node_computed_at_most_once(device: em.Device) -> None:
    dev = _dev(device, Strategy.Balanced)
    rng = np.random.default_rng(0)
    x = _leaf(rng.normal(size=(4, 5)).astype(np.float32), dev)
    w = _leaf(rng.normal(size=(5, 5)).astype(np.float32), dev)
    # a web of memory-bound ops sharing ancestors, cut by matmuls (kept)
    a = x.exp()
    b = a * a + a.sin()
    c = (b * 0.5).tanh() + b
    d = (c @ w).tanh() * c
    e = d.exp() * a + (d @ w).sin() * b
    grads = e.sum().backward()
    assert grads.recomputed, "nothing was recomputed"
    assert max(grads.recomputed.values()) == 1


def test_recomputed_values_released_after_last_use(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = _Probe(monkeypatch)
    dev = _dev(device, Strategy.Balanced)
    rng = np.random.default_rng(1)
    x = _leaf(rng.normal(size=(8, 8)).astype(np.float32), dev)
    w = _leaf((rng.normal(size=(8, 8)) * 0.3).astype(np.float32), dev)
    h = x
    for _ in range(40):  # 40 segments: matmul (kept) -> tanh -> * 2 -> exp (recomputed)
        h = ((h @ w).tanh() * 2.0).exp() * 0.1
    grads = h.sum().backward()
    assert len(grads.recomputed) == 40 * 4 - 1  # the last "* 0.1" is read by no step
    # only one segment's values are ever cached at once, and nothing is left at the end
    assert max(probe.sizes) <= 4
    assert probe.sizes[-1] == 0


def test_cache_empty_after_backward_on_diamonds(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = _Probe(monkeypatch)
    dev = _dev(device, Strategy.Balanced)
    x = _leaf(np.linspace(0.1, 1.0, 6, dtype=np.float32), dev)
    a = x.exp()
    b = a.sin() + a.cos()  # b never needs its own value: no claims on a for it
    c = (a * b).tanh()
    grads = (c + b).sum().backward()
    assert probe.sizes[-1] == 0
    assert max(grads.recomputed.values()) == 1


def test_compute_bound_outputs_and_leaves_kept_memory_bound_not(device: em.Device) -> None:
    dev = _dev(device, Strategy.Balanced)
    x = _leaf(np.ones((3, 4), np.float32), dev)
    w = _leaf(np.ones((4, 2), np.float32), dev)
    m = x @ w
    t = m.tanh()
    s = t.sum_dim(1)
    assert m._node is not None and t._node is not None and s._node is not None
    assert m._node.inputs == (None, None)  # its tracked inputs are read from the leaves
    # compute-bound: kept, held by the recipe child that recomputes from it
    assert t._node.recipe and t._node.output is None
    assert t._node.inputs is not None and t._node.inputs[0] is m._data
    assert s._node.inputs is None  # sum's rule reads nothing: the tanh is never recomputed
    assert x._node is not None and x._node.output is not None  # leaves keep their value


def test_compute_bound_output_no_child_reads_is_not_held(device: em.Device) -> None:
    """A kept output costs memory only while something will read it."""
    dev = _dev(device, Strategy.Balanced)
    x = _leaf(np.ones((3, 4), np.float32), dev)
    h = x.sum_dim(1)  # compute-bound, read by nothing below
    y = h.sum_dim(0)  # compute-bound, its rule reads nothing either
    assert h._node is not None and h._node.output is None and h._node.inputs is None
    assert y._node is not None and y._node.output is None and y._node.inputs is None
    g = y.sum().backward()
    np.testing.assert_array_equal(x.grad(g).to_numpy(), np.ones((3, 4)))


def test_memory_bound_op_with_untracked_parent(device: em.Device) -> None:
    """An untracked value can't be recomputed: an op that reads it (dropout's multiply by its
    mask) holds it anyway and stays a recipe; one whose rule reads nothing keeps its output."""
    dev = _dev(device, Strategy.Balanced)
    x = _leaf(np.full((2, 3), 0.5, np.float32), dev)
    c = em.Tensor.full((2, 3), 2.0, device=dev)  # untracked autodiff constant
    y = x * c
    n = y._node
    assert n is not None and n.recipe and n.output is None
    assert n.inputs is not None and n.inputs[0] is None and n.inputs[1] is c._data
    r = y.tanh()._node  # a recipe child of a recipe holds nothing of it
    assert r is not None and r.recipe and r.inputs is not None and r.inputs[0] is None
    plain = em.Tensor.full((2, 3), 3.0, device=device)  # a plain operand, lifted as a constant
    e = x.exp() + plain
    z = e._node
    assert z is not None and not z.recipe
    r2 = e.sin()._node  # its output is kept for the children that read it: a recipe child
    assert r2 is not None and r2.inputs is not None and r2.inputs[0] is e._data
    g = (e.sin() * y.tanh()).sum().backward()
    gx = x.grad(g)
    assert gx is not None
    xs = np.full((2, 3), 0.5, np.float32)
    want = (
        np.cos(np.exp(xs) + 3) * np.exp(xs) * np.tanh(2 * xs)
        + np.sin(np.exp(xs) + 3) * (1 - np.tanh(2 * xs) ** 2) * 2
    )
    np.testing.assert_allclose(gx.to_numpy(), want, rtol=1e-5)


def test_random_masks_kept_never_redrawn(device: em.Device) -> None:
    def build(dev: em.Device) -> tuple[Any, list[Any]]:
        em.seed(7)
        x = _leaf(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8), dev)
        keep = em.Tensor.random((8, 8), em.Distribution.bernoulli(0.5), device=dev)
        y = (x.tanh() * keep).exp() * keep
        return y.sum(), [x]

    ref, _ = _grads(device, Strategy.Disabled, build)
    got, grads = _grads(device, Strategy.Balanced, build)
    _assert_same(ref, got)
    assert grads.recomputed


@pytest.mark.parametrize("first", list(Strategy), ids=lambda s: s.name)
def test_mixed_strategies_in_one_graph(device: em.Device, first: Strategy) -> None:
    other = Strategy.Balanced if first is Strategy.Disabled else Strategy.Disabled

    def build(dev: em.Device, switch: bool) -> tuple[Any, list[Any]]:
        rng = np.random.default_rng(3)
        x = _leaf(rng.normal(size=(4, 6)).astype(np.float32), dev)
        w = _leaf(rng.normal(size=(6, 6)).astype(np.float32), dev)
        h = (x @ w).tanh().exp() * x.sin()
        if switch:
            h = h.with_gradient_checkpointing_strategy(other)
            w = w.with_gradient_checkpointing_strategy(other)
        h = (h * 0.5).sin() + h.exp()
        out = ((h @ w).tanh() * h).sum()
        return out, [x, w]

    ref, _ = _grads(device, Strategy.Disabled, lambda d: build(d, False))
    got, _ = _grads(device, first, lambda d: build(d, True))
    _assert_same(ref, got)


def test_second_backward_through_balanced_graph_raises(device: em.Device) -> None:
    dev = _dev(device, Strategy.Balanced)
    x = _leaf(np.ones((2, 2), np.float32), dev)
    h = x.exp().tanh()
    h.sum().backward()
    with pytest.raises(em.AutodiffError, match="already consumed"):
        (h * 2.0).sum().backward()
    # leaves stay reusable: a new forward under Balanced works
    grads = x.exp().tanh().sum().backward()
    assert x.grad(grads) is not None


def _row_grads(
    device: em.Device,
    strategy: Strategy,
    spec: OpSpec,
    arrays: tuple[np.ndarray, ...],
    attrs: dict[str, Any],
) -> tuple[list[np.ndarray], dict[int, int]]:
    dev = _dev(device, strategy)
    leaves = to_tensors(arrays, dev, require_grad=True)
    # exact identities around the row: memory-bound recipes it must fetch through
    ins = [(t * 1.0) + 0.0 if t.is_tracked() else t for t in leaves]
    out = run_row(spec, ins, runtime_attrs(spec, attrs, dev))
    if not out.is_tracked():
        return [], {}
    w = em.Tensor.from_data(
        np.linspace(0.5, 1.5, max(out.numel(), 1)).reshape(out.shape), device=dev, dtype=out.dtype
    ).require_grad()
    grads = ((out * 1.0) * w).sum().backward()  # the mul fetches the row's output
    got = []
    for t in [*leaves, w]:
        g = t.grad(grads)
        if g is not None:
            got.append(g.to_numpy())
    return got, grads.recomputed


@pytest.mark.parametrize("spec", DIFFERENTIABLE, ids=lambda s: s.name)
def test_every_row_between_recipes_matches_disabled(device: em.Device, spec: OpSpec) -> None:
    """Each differentiable row, fed and read through recomputed values, gives Disabled's grads."""
    rng = np.random.default_rng(0)
    for arrays, attrs in sample_cases(spec, rng)[:2]:
        arrays = tuple(np.array(a, np.float64) if a.dtype.kind == "f" else a for a in arrays)
        ref, _ = _row_grads(device, Strategy.Disabled, spec, arrays, attrs)
        got, counts = _row_grads(device, Strategy.Balanced, spec, arrays, attrs)
        _assert_same(ref, got)
        if ref:
            assert counts and max(counts.values()) == 1


def test_step_without_gradient_settles_its_claims(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that receives no gradient releases the values it would have fetched at once."""
    from ember._core.dispatch import apply
    from ember.ops.registry import Cost, Saves

    # a row whose rule passes no gradient on (registered for this test only)
    stop = OpSpec(
        "_test_stop_gradient",
        1,
        lambda ctx, grad: (None,),
        Cost.MEMORY_BOUND,
        Saves.INPUTS,
        forward=lambda b, x: b.mul_scalar(x, 1.0),
    )
    monkeypatch.setitem(OPS, stop.name, stop)
    probe = _Probe(monkeypatch)
    dev = _dev(device, Strategy.Balanced)
    x = _leaf(np.linspace(0.1, 1.0, 6, dtype=np.float32), dev)
    p = x * 2.0  # recipe; fetched by e's and c's steps
    e = p * x
    c = p.sin()  # gets no gradient: its step is skipped
    d = apply(stop, (c,), {})
    grads = (d + e).sum().backward()
    g = x.grad(grads)
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), (x * 2.0 + x * 2.0).to_numpy())
    # steps in order: sum, add, mul (e, recomputes p), stop (d), sin (c, skipped): p's last
    # claim lapses with the skip, so the cache is empty before p's own step
    assert probe.sizes[4] == 0
    assert max(grads.recomputed.values()) == 1


def test_backward_peak_stays_near_what_the_graph_keeps() -> None:
    """tracemalloc, NumPy: recomputed values do not pile up during backward."""
    import tracemalloc

    dev = em.Device.cpu().autodiff().gradient_checkpointing()
    rng = np.random.default_rng(2)
    w = _leaf((rng.normal(size=(128, 128)) * 0.1).astype(np.float32), dev)
    x = em.Tensor.from_data(rng.normal(size=(512, 128)).astype(np.float32), device=dev)
    h = x
    for _ in range(30):  # each segment: matmul (kept, 256 KiB) -> 5 recipes of 256 KiB each
        h = (((h @ w).tanh() * 2.0).exp() - 1.0) * 0.5
    loss = h.sum()
    kept = em.checkpoint.report(loss).total_bytes
    size = 512 * 128 * 4
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        grads = loss.backward()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(grads.recomputed) == 30 * 5 - 2  # the last segment's "- 1" and "* 0.5": unread
    # kept values are already allocated; backward adds gradients and one segment's recomputed
    # values (never all 148 of them: that would be 37 MiB)
    assert kept >= 30 * size
    assert peak <= 8 * size, peak / size


def _residual_stream(blocks: int) -> Callable[[em.Device], tuple[Any, list[Any]]]:
    """Pre-norm residual blocks: x <- x + layer_norm(x) @ w, then x <- x + tanh(x @ v)."""

    def build(dev: em.Device) -> tuple[Any, list[Any]]:
        rng = np.random.default_rng(3)
        x0 = _leaf(rng.normal(size=(6, 8)).astype(np.float32), dev)
        w = _leaf((rng.normal(size=(8, 8)) * 0.3).astype(np.float32), dev)
        v = _leaf((rng.normal(size=(8, 8)) * 0.3).astype(np.float32), dev)
        x = x0 * 1.0
        for _ in range(blocks):
            x = x + em.nn.functional.layer_norm(x, (8,)) @ w
            x = x + (x @ v).tanh()
        return (x * x).sum(), [x0, w, v]

    return build


def test_long_chain_keeps_the_residual_stream_not_its_norm(device: em.Device) -> None:
    # along a residual stream the recompute chain grows by two recipes a block (the adds; the
    # norm and tanh branch off it): where a child would pass MAX_CHAIN, the stream's value is
    # kept (the deepest parent, as large as the norm output) and the norm stays a recipe
    blocks = 12
    build = _residual_stream(blocks)
    loss, _ = build(_dev(device, Strategy.Balanced))
    report = em.checkpoint.report(loss)
    assert report.ops["layer_norm"].kept == 0
    assert report.ops["tanh"].kept == 0
    assert 1 <= report.ops["add"].kept <= 2 * blocks // (MAX_CHAIN // 2)
    del loss
    a, _ = _grads(device, Strategy.Disabled, build)
    b, grads = _grads(device, Strategy.Balanced, build)
    _assert_same(a, b)
    assert set(grads.recomputed.values()) == {1}
