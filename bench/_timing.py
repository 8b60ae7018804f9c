"""Shared timing helpers of the CPU benchmark scripts (bench/conv.py, bench/softmax_xent.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def pin_threads(threads: int) -> None:
    """ember's kernel pool and NumPy's BLAS get ``threads`` (EMBER_NUM_THREADS: ember sets the
    BLAS to it and runs BLAS at one thread inside its pool's split work, so the two never nest).
    Call before ember is imported."""
    os.environ["EMBER_NUM_THREADS"] = str(threads)


def alternating_ms(
    a: Callable[[], object], b: Callable[[], object], repeats: int, rounds: int = 5
) -> tuple[list[float], list[float]]:
    """Time ``repeats`` calls of ``a``, then of ``b``, for several rounds (milliseconds).

    Rounds alternate so drifting load on a shared machine hits both sides; a pause between
    blocks lets the other library's idle worker threads stop spinning first.
    """
    ta, tb = alternating([a, b], repeats, rounds)
    return ta, tb


def alternating(
    arms: list[Callable[[], object]],
    repeats: int,
    rounds: int = 5,
    pause: float = 0.2,
    turn: bool = False,
) -> list[list[float]]:
    """``alternating_ms`` for any number of arms: each arm's times (milliseconds), ``pause``
    seconds after each block; ``turn`` reverses the arms' order every other round, so no arm
    always runs right after the same other one."""
    times: list[list[float]] = [[] for _ in arms]
    for r in range(rounds):
        order = list(range(len(arms)))
        if turn and r % 2:
            order.reverse()
        for i in order:
            for _ in range(3):
                arms[i]()  # warm-up
            for _ in range(repeats):
                t = time.perf_counter()
                arms[i]()
                times[i].append(1e3 * (time.perf_counter() - t))
            if pause:
                time.sleep(pause)
    return times
