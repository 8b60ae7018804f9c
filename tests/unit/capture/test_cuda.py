"""CUDA-graph recordings on a GPU (skipped without CUDA): one graph per signature, a replay's
fresh dropout masks reproducible from the seed, the learning rate read on every replay, and the
memory peak with capture at most 1.1x the eager one (issue 14)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

from .steps import MLP, batches, build, classify_step, gpt_step, token_batches

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
GPTConfig = pytest.importorskip("ember.models.gpt").GPTConfig
GPT = pytest.importorskip("ember.models.gpt").GPT


@pytest.fixture
def cuda() -> em.Device:
    return em.Device.cuda(0)


def test_one_graph_per_signature(cuda: em.Device) -> None:
    from ember._capture.graph import GraphRecording

    model, optim = build(MLP, cuda), em.optim.SGD(momentum=0.9)
    captured = em.capture(classify_step)
    for x, y in batches(cuda, 6, (8, 6), 3):
        captured(model, optim, x, y, 0.1)
    assert captured.recorded == 1
    graphs = [e for e in captured._cache._entries.values() if isinstance(e, GraphRecording)]
    assert len(graphs) == 1


def test_dropout_draws_fresh_masks_each_replay_reproducibly(cuda: em.Device) -> None:
    drop = em.nn.Dropout(0.5)
    captured = em.capture(lambda m, x: m(x))
    x = em.Tensor.ones((256,), device=cuda)

    def masks() -> list[np.ndarray]:
        em.seed(3)
        return [captured(drop, x).to_numpy() for _ in range(6)]

    first = masks()
    assert captured.recorded == 1
    assert all(not np.array_equal(first[i], first[i + 1]) for i in range(5))  # fresh each call
    again = masks()  # replays only, from the same seed
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    em.seed(3)  # eager from the same seed: the same masks
    for a in first:
        np.testing.assert_array_equal(drop(x).to_numpy(), a)


def test_the_learning_rate_is_read_on_every_replay(cuda: em.Device) -> None:
    data = list(batches(cuda, 8, (8, 6), 3))
    lrs = [0.5 / (i + 1) for i in range(8)]
    ref, ref_opt = build(MLP, cuda), em.optim.SGD()
    for (x, y), lr in zip(data, lrs):
        classify_step(ref, ref_opt, x, y, lr)
    model, optim = build(MLP, cuda), em.optim.SGD()
    captured = em.capture(classify_step)
    for (x, y), lr in zip(data, lrs):
        captured(model, optim, x, y, lr)
    assert captured.recorded == 1
    for (_, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.val().to_numpy(), q.val().to_numpy(), rtol=1e-5, atol=1e-6)


def _peak(run: Any, steps: int) -> int:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        run()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def test_peak_memory_with_capture_within_1_1x_eager(cuda: em.Device) -> None:
    cfg = GPTConfig(vocab_size=65, block_size=128, n_layer=4, n_head=4, n_embd=256, dropout=0.1)
    x, y = next(token_batches(cuda, 1, 16, 128, 65))
    clip = em.optim.GradientClipping.norm(1.0)

    def setup() -> tuple[Any, Any]:
        em.seed(0)
        return GPT(cfg, device=cuda.autodiff()), em.optim.AdamW(grad_clipping=clip)

    model, optim = setup()
    gpt_step(model, optim, x, y, 1e-3)  # optimizer state exists in both measurements
    eager = _peak(lambda: gpt_step(model, optim, x, y, 1e-3), 4)
    del model, optim
    model, optim = setup()
    captured = em.capture(gpt_step)
    gpt_step(model, optim, x, y, 1e-3)
    peak = _peak(lambda: captured(model, optim, x, y, 1e-3), 6)  # warm-up, record, replays
    assert captured.recorded == 1
    assert peak <= 1.1 * eager, f"captured peak {peak / 2**20:.1f} MiB, eager {eager / 2**20:.1f}"
