"""A captured training step equals the eager one for 20 steps (SEMANTICS §12): losses, final
parameters and buffers. On the CPU backends a captured call is the eager call under the
host-read guard (bit for bit); on CUDA (the ``cuda`` backend, when present) it is a CUDA graph
replay, equal within float32 tolerance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em

from .steps import (
    CNN,
    MLP,
    apply_step,
    batches,
    buffers,
    build,
    classify_step,
    gpt_step,
    micro_step,
    params,
    tiny_gpt,
    token_batches,
)

STEPS = 20


def _close(device: em.Device) -> Callable[[Any, Any], None]:
    if device.is_cuda:  # graph kernels vs eager kernels (the optimizer's device-scalar path)
        return lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return np.testing.assert_array_equal


def _run(
    step: Callable[..., Any], model: Any, optim: Any, data: list[Any], lrs: list[float]
) -> list[float]:
    losses = []
    for (x, y), lr in zip(data, lrs):
        losses.append(step(model, optim, x, y, lr))
    return [float(v.item()) for v in losses]  # read after the calls, never inside


def _compare(
    device: em.Device,
    make: Callable[[em.Device], Any],
    optim: Callable[[], Any],
    step: Callable[..., Any],
    data: list[Any],
    lrs: list[float],
) -> em.nn.Module:
    eager_model, eager_optim = build(make, device), optim()
    em.seed(1)
    eager = _run(step, eager_model, eager_optim, data, lrs)
    model, opt = build(make, device), optim()
    ids = [p.id for p in model.parameters()]
    captured = em.capture(step)
    em.seed(1)
    got = _run(captured, model, opt, data, lrs)
    close = _close(device)
    close(got, eager)
    want, have = params(eager_model), params(model)
    assert have.keys() == want.keys()
    for name in want:
        close(have[name], want[name])
    for name, b in buffers(eager_model).items():
        close(buffers(model)[name], b)
    assert [p.id for p in model.parameters()] == ids  # same ParamIds after every call
    assert all(p.is_require_grad() for p in model.parameters())
    if device.is_cuda:
        assert captured.recorded >= 1  # a CUDA graph was recorded and replayed
    return model


def test_mlp_sgd(device: em.Device) -> None:
    data = list(batches(device, STEPS, (8, 6), 3))
    lrs = [0.1 * 0.97**i for i in range(STEPS)]  # a new rate every step: never baked in
    _compare(
        device, MLP, lambda: em.optim.SGD(momentum=0.9, weight_decay=1e-3), classify_step, data, lrs
    )


def test_gpt_dropout_adamw_clipping_cosine(device: em.Device) -> None:
    data = list(token_batches(device, STEPS, 4, 8, 11))
    schedule = em.optim.lr.CosineAnnealing(3e-3, 1e-4, num_iters=STEPS)
    lrs = [next(schedule) for _ in range(STEPS)]
    clip = em.optim.GradientClipping.norm(1.0)
    _compare(
        device,
        tiny_gpt,
        lambda: em.optim.AdamW(weight_decay=0.1, grad_clipping=clip),
        gpt_step,
        data,
        lrs,
    )


def test_cnn_batch_norm_running_statistics(device: em.Device) -> None:
    data = list(batches(device, STEPS, (4, 2, 6, 6), 3))
    model = _compare(device, CNN, lambda: em.optim.Adam(), classify_step, data, [1e-3] * STEPS)
    # the running statistics moved away from their initial values
    assert not np.allclose(model.bn.running_mean.to_numpy(), 0.0)
    assert int(model.bn.num_batches_tracked.item()) == STEPS


def test_balanced_strategy(device: em.Device) -> None:
    data = list(batches(device, STEPS, (8, 6), 3))

    def make(d: em.Device) -> MLP:
        return MLP(d.gradient_checkpointing())

    model = _compare(device, make, lambda: em.optim.Adam(), classify_step, data, [1e-2] * STEPS)
    strategy = next(model.parameters()).val().gradient_checkpointing_strategy()
    assert strategy == em.GradientCheckpointingStrategy.Balanced


@pytest.mark.parametrize("fraction", [0.7, 0.4])
def test_budget_strategy(device: em.Device, fraction: float) -> None:
    """A memory budget under capture: the warm-up call measures the graph's Disabled peak, the
    recording call drops values by the learned limit, replays recompute them as it did."""
    data = list(batches(device, STEPS, (8, 6), 3))
    budget = em.GradientCheckpointingStrategy.budget(fraction=fraction)

    def make(d: em.Device) -> MLP:
        return MLP(d.gradient_checkpointing(budget=budget))

    model = _compare(device, make, lambda: em.optim.Adam(), classify_step, data, [1e-2] * STEPS)
    assert next(model.parameters()).val().gradient_checkpointing_strategy() == budget


def test_gradient_accumulation_over_captured_micro_steps(device: em.Device) -> None:
    n_micro, steps = 4, 5  # 20 micro-steps
    data = list(batches(device, n_micro * steps, (4, 6), 3))

    def train(
        model: Any, optim: Any, micro: Callable[..., Any], apply: Callable[..., Any]
    ) -> list[float]:
        losses = []
        for s in range(steps):
            acc = em.optim.GradientsAccumulator()
            for x, y in data[s * n_micro : (s + 1) * n_micro]:
                loss, grads = micro(model, x, y, 1.0 / n_micro)
                acc.accumulate(model, grads)
                losses.append(loss)
            apply(model, optim, acc.grads(), 0.05)
        return [float(v.item()) for v in losses]

    eager_model, eager_optim = build(MLP, device), em.optim.SGD(momentum=0.9)
    want = train(eager_model, eager_optim, micro_step, apply_step)
    model, optim = build(MLP, device), em.optim.SGD(momentum=0.9)
    micro, apply = em.capture(micro_step), em.capture(apply_step)
    got = train(model, optim, micro, apply)
    close = _close(device)
    close(got, want)
    for name, w in params(eager_model).items():
        close(params(model)[name], w)
