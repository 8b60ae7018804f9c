"""Gradient checkpointing end to end (issue 4): Balanced gives Disabled's gradients bit for bit on
real models, recomputes each value at most once, and cuts peak training memory."""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

Strategy = em.GradientCheckpointingStrategy
Build = Callable[[em.Device], tuple[em.Tensor, list[em.Tensor]]]


@functools.cache
def _bench() -> ModuleType:
    """bench/checkpointing.py: the 12-block model the benchmark measures."""
    path = Path(__file__).resolve().parents[2] / "bench" / "checkpointing.py"
    spec = importlib.util.spec_from_file_location("_bench_checkpointing", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def _run(device: em.Device, strategy: Strategy, build: Build) -> tuple[list[np.ndarray], Any]:
    dev = device.autodiff()
    if strategy is Strategy.Balanced:
        dev = dev.gradient_checkpointing()
    em.seed(1234)  # dropout masks: the same draws under both strategies
    loss, leaves = build(dev)
    grads = loss.backward()
    out = []
    for leaf in leaves:
        g = leaf.grad(grads)
        assert g is not None
        out.append(g.to_numpy())
    return out, grads


def _check_bit_exact(device: em.Device, build: Build) -> dict[int, int]:
    ref, _ = _run(device, Strategy.Disabled, build)
    got, grads = _run(device, Strategy.Balanced, build)
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)  # bit for bit
    counts: dict[int, int] = grads.recomputed
    assert counts, "Balanced recomputed nothing"
    assert max(counts.values()) == 1, "a value was recomputed twice in one backward"
    return counts


def _param(dev: em.Device, rng: np.random.Generator, *shape: int) -> em.Tensor:
    a = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    return em.Tensor.from_data(a, device=dev).require_grad()


def _mlp(dev: em.Device) -> tuple[em.Tensor, list[em.Tensor]]:
    rng = np.random.default_rng(0)
    ps = [_param(dev, rng, 64, 32), _param(dev, rng, 64), _param(dev, rng, 10, 64)]
    x = em.Tensor.from_data(rng.standard_normal((16, 32)).astype(np.float32), device=dev)
    y = em.Tensor.from_data(rng.integers(0, 10, size=16), device=dev)
    h = F.relu(F.linear(x, ps[0], ps[1]))
    h = F.gelu(F.linear(h, ps[2])) * 2.0 - 0.5
    return F.cross_entropy(h, y), ps


def _cnn(dev: em.Device) -> tuple[em.Tensor, list[em.Tensor]]:
    rng = np.random.default_rng(1)
    ps = [
        _param(dev, rng, 8, 3, 3, 3),
        _param(dev, rng, 8),
        _param(dev, rng, 16, 8, 3, 3),
        _param(dev, rng, 10, 16 * 4 * 4),
    ]
    x = em.Tensor.from_data(rng.standard_normal((4, 3, 16, 16)).astype(np.float32), device=dev)
    y = em.Tensor.from_data(rng.integers(0, 10, size=4), device=dev)
    h = F.max_pool2d(F.relu(F.conv2d(x, ps[0], ps[1], padding=1)), 2)  # (4, 8, 8, 8)
    h = F.max_pool2d(F.silu(F.conv2d(h, ps[2], padding=1)), 2)  # (4, 16, 4, 4)
    h = F.dropout(h.flatten(1), 0.2)
    return F.cross_entropy(F.linear(h, ps[3]), y), ps


def _transformer_block(fused: bool) -> Build:
    bench = _bench()
    cfg = bench.Config(blocks=1, d_model=32, num_heads=4, seq_len=8, batch=2, fused=fused)

    def build(dev: em.Device) -> tuple[em.Tensor, list[em.Tensor]]:
        params = bench.init_params(cfg, dev)
        x = bench.make_input(cfg, dev)
        loss = bench.forward(x, params, cfg)
        return loss, [t for p in params for t in p.values()]

    return build


def _chain(dev: em.Device) -> tuple[em.Tensor, list[em.Tensor]]:
    x = em.Tensor.from_data(np.linspace(-1.0, 1.0, 32, dtype=np.float32), device=dev)
    x = x.require_grad()
    y = x
    for i in range(2_500):  # 10,000 elementwise ops
        y = ((y * 0.9).sin() + 0.01).tanh() if i % 2 else ((y + 0.1).exp() - 1.0).log1p()
    return (y * y).sum(), [x]


def test_mlp_bit_exact(device: em.Device) -> None:
    _check_bit_exact(device, _mlp)


def test_cnn_bit_exact(device: em.Device) -> None:
    _check_bit_exact(device, _cnn)


@pytest.mark.parametrize("fused", [False, True], ids=["primitives", "fused"])
def test_transformer_block_with_dropout_and_layer_norm_bit_exact(
    device: em.Device, fused: bool
) -> None:
    _check_bit_exact(device, _transformer_block(fused))


def test_10000_op_chain_bit_exact(device: em.Device) -> None:
    counts = _check_bit_exact(device, _chain)
    # one value in MAX_CHAIN is kept along the chain (ember.checkpoint.record: the parent of the
    # op that would pass MAX_CHAIN): the other 8,750 are recipes, most recomputed (the chain's
    # 8-op period puts each kept value on the same op, so the same 2 of 7 recipes a period are
    # never asked for: 5 x 1,250)
    assert len(counts) >= 6_000


@pytest.mark.slow
def test_peak_memory_of_12_block_transformer() -> None:
    """tracemalloc peak of forward + backward, NumPy backend: Balanced <= 0.6x Disabled.

    The model composes layer norm, softmax and GELU from primitive rows, with dropout on the
    residual branches (bench/RESULTS.md also gives attention dropout and the fused rows).
    """
    bench = _bench()
    cfg = bench.Config(attn_drop=False)
    disabled = bench.ember_peak_bytes(cfg, Strategy.Disabled)
    balanced = bench.ember_peak_bytes(cfg, Strategy.Balanced)
    assert balanced <= 0.6 * disabled, (balanced / 2**20, disabled / 2**20)
