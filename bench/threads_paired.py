"""ember's training steps at two threads against one, paired step by step in one process.

Issue 20 asks that two threads beat one on every workload of ``numpy_models.py``. On a shared
VM whose speed drifts by 1.5x within minutes, separate runs (or blocks of steps) at each count
compare moments more than thread counts. Here the two arms take turns one step at a time:
before each timed step the arm's thread count is set (``EMBER_NUM_THREADS``, which ember's
kernels read on each call, and NumPy's BLAS threads) and one untimed step of that arm is run.
The order within a pair turns every pair. Printed per workload: each arm's median step, the
median of the paired differences (one thread minus two: positive means two threads are
faster) and the share of pairs where two threads won.

  taskset -c 0,1 python bench/threads_paired.py [--only lenet,cnn] [--pairs 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("EMBER_NUM_THREADS", "2")  # before ember loads: BLAS gets two threads


def _arm(threads: int, step: Callable[[], object]) -> Callable[[], float]:
    """One untimed and one timed step (ms) at ``threads``."""
    from ember.backend.numpy.kernels import blas

    def run() -> float:
        os.environ["EMBER_NUM_THREADS"] = str(threads)
        for _, put in blas._libraries():
            put(threads)
        step()  # the first step after a switch (pool and BLAS threads wake or settle)
        t = time.perf_counter()
        step()
        return 1e3 * (time.perf_counter() - t)

    return run


def paired(name: str, pairs: int) -> dict[str, float]:
    """Medians (ms) of each arm, the paired difference one minus two threads, the win share."""
    import numpy_models as nm

    step = nm.ember_step(name)
    arms = {2: _arm(2, step), 1: _arm(1, step)}
    for arm in arms.values():
        arm()  # warm-up
    times: dict[int, list[float]] = {2: [], 1: []}
    for i in range(pairs):
        for threads in (2, 1) if i % 2 == 0 else (1, 2):
            times[threads].append(arms[threads]())
    diffs = [one - two for one, two in zip(times[1], times[2])]
    return {
        "two_ms": statistics.median(times[2]),
        "one_ms": statistics.median(times[1]),
        "gain_ms": statistics.median(diffs),
        "wins": sum(d > 0 for d in diffs) / len(diffs),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="cnn,resnet,dcgan,lenet,gpt")
    ap.add_argument("--pairs", type=int, default=40)
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for name in [s for s in args.only.split(",") if s]:
        r = paired(name, args.pairs)
        print(
            f"{name:7s} two threads {r['two_ms']:8.2f} ms  one {r['one_ms']:8.2f} ms  "
            f"paired gain {r['gain_ms']:+7.2f} ms  two won {100 * r['wins']:3.0f}% of pairs",
            flush=True,
        )


if __name__ == "__main__":
    main()
