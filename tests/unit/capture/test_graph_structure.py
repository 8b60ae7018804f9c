"""The CUDA recording's structure, run on the torch CPU backend: static input buffers, Python
numbers as 0-d device tensors (a new learning rate every step, the optimizer counting steps on
the device), the module and optimizer bound to static state (same ParamIds, in-place updates),
``model.load`` between calls copied in, outputs copied out. ``ReplayByCalling`` stands in for
``torch.cuda.CUDAGraph``: it runs the recorded function again on replay and, like a CUDA
capture, leaves the static arrays and the random stream unchanged while recording."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember._capture.api import Captured
from ember._capture.graph import GraphRecording

from .steps import (
    CNN,
    MLP,
    ReplayByCalling,
    batches,
    buffers,
    build,
    classify_step,
    gpt_step,
    params,
    tiny_gpt,
    token_batches,
)

torch = pytest.importorskip("torch")
STEPS = 12


def _captured(fn: Any, **kw: Any) -> Captured:
    return Captured(
        fn, fallback=False, max_recordings=8, graph=ReplayByCalling, record_cpu=True, **kw
    )


@pytest.fixture
def tdev() -> em.Device:
    return em.Device.torch("cpu")


def _compare(
    tdev: em.Device, make: Any, optim: Any, step: Any, data: list[Any], lrs: list[float]
) -> tuple[Any, Any, Captured]:
    eager_model, eager_optim = build(make, tdev), optim()
    em.seed(1)
    want = [float(step(eager_model, eager_optim, x, y, lr).item()) for (x, y), lr in zip(data, lrs)]
    model, opt = build(make, tdev), optim()
    ids = [p.id for p in model.parameters()]
    captured = _captured(step)
    em.seed(1)
    losses = [captured(model, opt, x, y, lr) for (x, y), lr in zip(data, lrs)]
    got = [float(v.item()) for v in losses]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for name, w in params(eager_model).items():
        np.testing.assert_allclose(params(model)[name], w, rtol=1e-5, atol=1e-6, err_msg=name)
    for name, b in buffers(eager_model).items():
        np.testing.assert_allclose(buffers(model)[name], b, rtol=1e-5, atol=1e-6, err_msg=name)
    assert [p.id for p in model.parameters()] == ids
    assert all(p.is_require_grad() for p in model.parameters())
    return model, opt, captured


def test_sgd_replays_with_a_new_rate_every_step(tdev: em.Device) -> None:
    data = list(batches(tdev, STEPS, (8, 6), 3))
    lrs = [0.1 * 0.9**i for i in range(STEPS)]
    _, _, captured = _compare(
        tdev, MLP, lambda: em.optim.SGD(momentum=0.9), classify_step, data, lrs
    )
    # call 1: no momentum yet (its own signature), call 2: warm-up, call 3 records; one graph
    assert captured.recorded == 1 and isinstance(_recording(captured), GraphRecording)


def test_adamw_counts_steps_on_the_device(tdev: em.Device) -> None:
    data = list(token_batches(tdev, STEPS, 2, 8, 11))
    schedule = em.optim.lr.CosineAnnealing(3e-3, 1e-4, num_iters=STEPS)
    lrs = [next(schedule) for _ in range(STEPS)]
    clip = em.optim.GradientClipping.norm(1.0)

    def make(d: em.Device) -> Any:
        m = tiny_gpt(d)
        m.drop.p = 0.0  # the replay-by-calling stand-in draws dropout as eager does; see CUDA test
        return m

    opt = lambda: em.optim.AdamW(weight_decay=0.1, grad_clipping=clip)
    model, optim, captured = _compare(tdev, make, opt, gpt_step, data, lrs)
    assert captured.recorded == 1
    for p in model.parameters():  # the step count lives on the device since the recording
        step = optim.state_of(p.id)["step"]
        assert isinstance(step, em.Tensor) and step.dtype is em.int64 and step.item() == STEPS


def test_batch_norm_buffers_are_state(tdev: em.Device) -> None:
    data = list(batches(tdev, STEPS, (4, 2, 6, 6), 3))
    model, _, _ = _compare(tdev, CNN, lambda: em.optim.Adam(), classify_step, data, [1e-3] * STEPS)
    assert int(model.bn.num_batches_tracked.item()) == STEPS


def test_replay_updates_the_modules_storages_in_place(tdev: em.Device) -> None:
    model, optim = build(MLP, tdev), em.optim.SGD()
    captured = _captured(classify_step)
    data = list(batches(tdev, 4, (8, 6), 3))
    for x, y in data[:3]:
        captured(model, optim, x, y, 0.1)
    before = {n: p.val()._raw.data_ptr() for n, p in model.named_parameters()}
    held = model.l1.weight.val().to_numpy()
    captured(model, optim, *data[3], 0.1)
    assert {n: p.val()._raw.data_ptr() for n, p in model.named_parameters()} == before
    assert not np.array_equal(model.l1.weight.val().to_numpy(), held)


@pytest.mark.parametrize("how", ["load_state_dict", "load"])
def test_parameters_replaced_between_calls_are_used_next(
    tdev: em.Device, tmp_path: Any, how: str
) -> None:
    """``load_state_dict`` keeps the ParamIds: the next call replays with the new values copied
    into the recording's buffers. ``model.load`` also restores the file's ParamIds (the
    optimizer state is keyed by them): a new signature, so the next calls record again."""
    data = list(batches(tdev, 6, (8, 6), 3))
    other = build(MLP, tdev, seed=5)
    other.save(tmp_path / "other.safetensors")

    def replace(m: Any) -> None:
        if how == "load":
            m.load(tmp_path / "other.safetensors")
        else:
            m.load_state_dict(other.state_dict())

    ref, ref_opt = build(MLP, tdev), em.optim.SGD()
    for x, y in data[:3]:
        classify_step(ref, ref_opt, x, y, 0.1)
    replace(ref)
    want = [float(classify_step(ref, ref_opt, x, y, 0.1).item()) for x, y in data[3:]]
    model, optim = build(MLP, tdev), em.optim.SGD()
    captured = _captured(classify_step)
    for x, y in data[:3]:
        captured(model, optim, x, y, 0.1)
    assert captured.recorded == 1
    replace(model)
    got = [float(captured(model, optim, x, y, 0.1).item()) for x, y in data[3:]]
    assert captured.recorded == (1 if how == "load_state_dict" else 2)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for name, w in params(ref).items():
        np.testing.assert_allclose(params(model)[name], w, rtol=1e-6, atol=1e-7)


def test_returned_tensors_are_copies(tdev: em.Device) -> None:
    model, optim = build(MLP, tdev), em.optim.SGD()
    captured = _captured(classify_step)
    losses = [captured(model, optim, x, y, 0.1) for x, y in batches(tdev, 5, (8, 6), 3)]
    values = [v.item() for v in losses]
    assert len(set(values)) == len(values)  # each call's loss kept its value
    assert not any(v.is_tracked() for v in losses[2:])  # replays return plain values


def test_outputs_rebuild_with_constants_and_refuse_other_objects(tdev: em.Device) -> None:
    def step(model: Any, x: em.Tensor) -> Any:
        out = model(x)
        return {"sum": out.sum(), "rows": out.shape[0], "tag": "mlp", "none": None}

    model = build(MLP, tdev)
    captured = _captured(step)
    x = next(batches(tdev, 1, (8, 6), 3))[0]
    first = captured(model, x)
    again = captured(model, x)  # the recording
    assert again.keys() == first.keys() and again["rows"] == 8 and again["tag"] == "mlp"
    assert again["sum"].item() == pytest.approx(first["sum"].item(), rel=1e-6)

    bad = _captured(lambda m, x: (m(x), object()))
    bad(model, x)
    with pytest.raises(em.CaptureError, match="returned a object"):
        bad(model, x)


def _recording(c: Captured) -> Any:
    return next(e for e in c._cache._entries.values() if isinstance(e, GraphRecording))


def test_adam_takes_the_fused_kernel_with_device_rate_and_count(
    tdev: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a recording AdamW's parameters share one device step count: one multi-tensor
    ``adam_many`` call with the count and the rate as device tensors, not a kernel per op."""
    seen: list[tuple[Any, Any]] = []
    backend = type(tdev.b)
    real = backend.adam_many

    def spy(self: Any, params: Any, grads: Any, m: Any, v: Any, step: Any, lr: Any, *a: Any) -> Any:
        seen.append((step, lr))
        return real(self, params, grads, m, v, step, lr, *a)

    monkeypatch.setattr(backend, "adam_many", spy)
    model, optim = build(MLP, tdev), em.optim.AdamW()
    captured = _captured(classify_step)
    for x, y in batches(tdev, 5, (8, 6), 3):
        captured(model, optim, x, y, 1e-3)
    assert captured.recorded == 1
    assert isinstance(seen[0][0], int) and isinstance(seen[0][1], float)  # eager warm-up
    assert all(isinstance(s, torch.Tensor) and isinstance(r, torch.Tensor) for s, r in seen[2:])
    # one call per step (the recording runs the step once more: 2 warm-up + record + 3 replays),
    # the fused path, never a kernel per parameter
    assert len(seen) == 6


def test_optimizer_state_loaded_between_calls_is_used_next(tdev: em.Device) -> None:
    """``optim.load_state_dict`` puts counts back as ints and moments as new tensors: the next
    replay copies them into the recording's buffers (no new recording)."""
    data = list(batches(tdev, 7, (8, 6), 3))
    ref, ref_opt = build(MLP, tdev), em.optim.Adam()
    for x, y in data[:2]:
        classify_step(ref, ref_opt, x, y, 1e-2)
    saved = {k: v.detach() for k, v in ref_opt.state_dict(ref).items()}
    for x, y in data[2:4]:
        classify_step(ref, ref_opt, x, y, 1e-2)
    ref_opt.load_state_dict(saved, ref)  # back to the moments and count after step 2
    want = [float(classify_step(ref, ref_opt, x, y, 1e-2).item()) for x, y in data[4:]]
    model, optim = build(MLP, tdev), em.optim.Adam()
    captured = _captured(classify_step)
    for x, y in data[:4]:
        captured(model, optim, x, y, 1e-2)
    assert captured.recorded == 1
    optim.load_state_dict(saved, model)
    got = [float(captured(model, optim, x, y, 1e-2).item()) for x, y in data[4:]]
    assert captured.recorded == 1
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
