"""Host reads inside a captured function (the clear error, ``fallback=True``'s one warning), the
signature (a new batch shape records again, a new learning rate does not), the cache bound, and
bad arguments to ``em.capture``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import ember as em

from .steps import MLP, batches, build, classify_step, params, recorder

F = em.nn.functional


def _reads_item(model: Any, optim: Any, x: em.Tensor, y: em.Tensor, lr: float) -> float:
    loss = classify_step(model, optim, x, y, lr)
    return loss.item()  # a host read: cannot be captured


@pytest.mark.parametrize(
    ("read", "op"),
    [
        (lambda t: t.item(), r"Tensor\.item\(\)"),
        (lambda t: t.to_numpy(), r"Tensor\.to_numpy\(\)"),
        (lambda t: t.tolist(), r"Tensor\.to_numpy\(\)"),
        (lambda t: float(t), r"Tensor\.item\(\)"),
        (lambda t: bool(t > 0), r"Tensor\.item\(\)"),
        (lambda t: t.reshape((1,))[t.reshape((1,)) > 0], r"Tensor\.to_numpy\(\)"),  # data-dependent
    ],
)
def test_host_read_inside_fn_names_the_op(device: em.Device, read: Any, op: str) -> None:
    captured = em.capture(lambda x: read(x.sum()))
    x = em.tensor(np.arange(4.0, dtype=np.float32), device=device)
    with pytest.raises(em.CaptureError, match=op) as info:
        captured(x)
    message = str(info.value)
    assert "fallback=True" in message and "after the call" in message
    assert "test_guard_and_cache.py" in message  # where the read was written
    assert x.sum().item() == 6.0  # outside the call, reads are fine


def test_item_in_a_training_step_is_refused(device: em.Device) -> None:
    model, optim = build(MLP, device), em.optim.SGD()
    x, y = next(batches(device, 1, (8, 6), 3))
    with pytest.raises(em.CaptureError, match=r"item\(\).*_reads_item"):
        em.capture(_reads_item)(model, optim, x, y, 0.1)


def test_fallback_warns_once_and_runs_eagerly(device: em.Device) -> None:
    data = list(batches(device, 4, (8, 6), 3))
    ref, ref_opt = build(MLP, device), em.optim.SGD()
    want = [_reads_item(ref, ref_opt, x, y, 0.1) for x, y in data]
    model, optim = build(MLP, device), em.optim.SGD()
    captured = em.capture(_reads_item, fallback=True)
    with pytest.warns(RuntimeWarning, match=r"runs eagerly.*") as record:
        got = [captured(model, optim, x, y, 0.1) for x, y in data[:2]]
    assert len([w for w in record if "capture" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        got += [captured(model, optim, x, y, 0.1) for x, y in data[2:]]
    assert got == want
    for name, w in params(ref).items():
        np.testing.assert_array_equal(params(model)[name], w)


def _recorder(fn: Any, device: em.Device, **kw: Any) -> Any:
    captured = recorder(fn, device, **kw)
    if captured is None:
        pytest.skip("the NumPy backend records nothing (every call is the eager call)")
    return captured


def test_cpu_backends_record_nothing(device: em.Device) -> None:
    if device.is_cuda:
        pytest.skip("CUDA records")
    model, optim = build(MLP, device), em.optim.SGD(momentum=0.9)
    captured = em.capture(classify_step)
    for x, y in batches(device, 4, (8, 6), 3):
        captured(model, optim, x, y, 0.1)
    assert captured.recorded == 0 and captured.recordings == 0


def test_a_new_batch_shape_records_again_a_new_rate_does_not(device: em.Device) -> None:
    model, optim = build(MLP, device), em.optim.SGD(momentum=0.9)
    captured = _recorder(classify_step, device)
    for x, y in batches(device, 3, (8, 6), 3):
        captured(model, optim, x, y, 0.1)
    n = captured.recorded
    for i, (x, y) in enumerate(batches(device, 3, (8, 6), 3, seed=1)):
        captured(model, optim, x, y, 0.1 / (i + 1))  # new rates: same signature
    assert captured.recorded == n
    for x, y in batches(device, 3, (5, 6), 3):  # a smaller last batch: a new signature
        captured(model, optim, x, y, 0.1)
    assert captured.recorded == n + 1
    for x, y in batches(device, 2, (8, 6), 3):  # the first shape is still cached
        captured(model, optim, x, y, 0.1)
    assert captured.recorded == n + 1 and captured.recordings == 3


def test_the_cache_keeps_max_recordings_dropping_the_oldest(device: em.Device) -> None:
    captured = _recorder(lambda x: x * 2.0, device, max_recordings=2)
    xs = [em.Tensor.ones((n,), device=device) for n in (1, 2, 3)]
    for x in xs:
        captured(x)
        captured(x)  # the second call of a signature records
    assert captured.recordings == 2 and captured.recorded == 3
    captured(xs[2])  # newest: cached
    assert captured.recorded == 3
    captured(xs[0])  # the oldest was dropped: a warm-up again, then a recording
    captured(xs[0])
    assert captured.recorded == 4 and captured.recordings == 2
    assert captured(xs[0]).tolist() == [2.0]


def test_dtype_strategy_and_training_mode_are_in_the_signature(device: em.Device) -> None:
    model = build(MLP, device)
    captured = _recorder(lambda m, x: m(x).sum(), device)
    x = next(batches(device, 1, (8, 6), 3))[0]

    def twice(x: em.Tensor) -> None:  # a warm-up and a recording
        captured(model, x)
        captured(model, x)

    twice(x)
    twice(x.cast(em.float64))
    assert captured.recorded == 2
    model.valid()
    twice(x)
    assert captured.recorded == 3
    model.train()
    with em.amp.autocast(em.bfloat16):
        twice(x)
    assert captured.recorded == 4
    twice(x)
    assert captured.recorded == 4


def test_closure_state_is_state(device: em.Device) -> None:
    model, optim = build(MLP, device), em.optim.SGD()
    ref, ref_opt = build(MLP, device), em.optim.SGD()

    def step(x: em.Tensor, y: em.Tensor, lr: float) -> em.Tensor:
        return classify_step(model, optim, x, y, lr)

    captured = em.capture(step)
    for x, y in batches(device, 4, (8, 6), 3):
        a = captured(x, y, 0.1)
        b = classify_step(ref, ref_opt, x, y, 0.1)
        assert a.item() == b.item()
    assert captured.recorded == (1 if device.is_cuda else 0)


def test_captured_keeps_the_functions_name_and_doc() -> None:
    def train_step(x: em.Tensor) -> em.Tensor:
        """Doubles."""
        return x * 2.0

    captured = em.capture(train_step)
    assert captured.__name__ == "train_step" and captured.__doc__ == "Doubles."
    assert "train_step" in repr(captured)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fn": 3}, em.DTypeError, "expected a callable"),
        ({"fn": print, "max_recordings": 0}, em.ShapeError, "max_recordings >= 1"),
        ({"fn": print, "max_recordings": 1.5}, em.DTypeError, "an int for max_recordings"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        em.capture(**kwargs)


def test_capturing_twice_is_refused() -> None:
    captured = em.capture(print)
    with pytest.raises(em.DTypeError, match="already captured"):
        em.capture(captured)


def test_capture_error_is_an_ember_error() -> None:
    assert issubclass(em.CaptureError, em.EmberError)
