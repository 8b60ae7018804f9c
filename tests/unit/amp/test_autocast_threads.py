"""``amp.autocast`` is per thread and per task: a context variable, as ``torch.autocast``."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember import amp

_ITERS = 200


def _devices() -> list[em.Device]:
    devices = [em.Device.cpu()]
    try:
        import torch  # noqa: F401
    except ImportError:
        return devices
    return [*devices, em.Device.torch("cpu")]


@pytest.mark.parametrize("device", _devices(), ids=["numpy", "torch-cpu"][: len(_devices())])
def test_autocast_in_one_thread_never_reaches_another(device: em.Device) -> None:
    rng = np.random.default_rng(0)
    x = em.tensor(rng.standard_normal((4, 8)).astype(np.float32), device=device)
    w = em.tensor(rng.standard_normal((3, 8)).astype(np.float32), device=device)
    barrier = threading.Barrier(2)
    seen: dict[str, list[em.DType]] = {"inside": [], "outside": []}
    errors: list[BaseException] = []

    def inside() -> None:
        try:
            with amp.autocast(em.bfloat16):
                for _ in range(_ITERS):
                    barrier.wait()
                    seen["inside"].append(F.linear(x, w).dtype)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            barrier.abort()

    def outside() -> None:
        try:
            for _ in range(_ITERS):
                barrier.wait()
                seen["outside"].append(F.linear(x, w).dtype)
                assert amp.current_policy() is None
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=inside), threading.Thread(target=outside)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert seen["inside"] == [em.bfloat16] * _ITERS
    assert seen["outside"] == [em.float32] * _ITERS


def test_a_thread_started_inside_autocast_starts_outside_it() -> None:
    x = em.Tensor.ones((2, 4))
    w = em.Tensor.ones((3, 4))
    out: list[em.DType] = []
    with amp.autocast(em.bfloat16):
        t = threading.Thread(target=lambda: out.append(F.linear(x, w).dtype))
        t.start()
        t.join()
        assert F.linear(x, w).dtype is em.bfloat16
    assert out == [em.float32]


def test_autocast_in_one_asyncio_task_never_reaches_another() -> None:
    x = em.Tensor.ones((2, 4))
    w = em.Tensor.ones((3, 4))

    async def low(entered: asyncio.Event, done: asyncio.Event) -> em.DType:
        with amp.autocast(em.bfloat16):
            entered.set()
            await done.wait()
            return F.linear(x, w).dtype

    async def full(entered: asyncio.Event, done: asyncio.Event) -> em.DType:
        await entered.wait()
        dtype = F.linear(x, w).dtype
        done.set()
        return dtype

    async def main() -> tuple[em.DType, em.DType]:
        entered, done = asyncio.Event(), asyncio.Event()
        a, b = await asyncio.gather(low(entered, done), full(entered, done))
        return a, b

    assert asyncio.run(main()) == (em.bfloat16, em.float32)
