"""What a host charges ember's NumPy kernel pool: the hand-off, and reads of another core's data.

A study of the two-thread costs behind issue 20 (bench/RESULTS.md, session 16), not a benchmark
of a workload. Each row is a median over ``--calls`` calls, with the 10th and 90th percentiles:

- ``split, two empty shares``: ``_parallel_split`` handing one empty share to the pool thread;
- ``exp 64K serial`` / ``split``: one ``np.exp`` over 64 K float32 values, alone and split;
- ``maximum after main / pool wrote``: ``np.maximum(x, 0)`` over an array last written by
  the calling thread or by a pool thread (``--mb`` MB of float32);
- ``matmul pool split`` / ``OpenBLAS threads``: (1024, 128) @ (128, 512) float32 split by
  ember's pool, and as one ``np.matmul`` on OpenBLAS's own threads.

Usage: taskset -c 0,1 python bench/pool_probe.py [--calls 300] [--mb 6.4]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ["EMBER_NUM_THREADS"] = "2"  # before the kernels load: a pool of two threads


def _percentiles(fn: Callable[[], object], prep: Callable[[], object], calls: int) -> str:
    """``fn``'s p50 / p10 / p90 in µs, ``prep`` run untimed before each call."""
    for _ in range(5):
        prep()
        fn()
    ts = []
    for _ in range(calls):
        prep()
        t = time.perf_counter()
        fn()
        ts.append(1e6 * (time.perf_counter() - t))
    ts.sort()
    return f"{ts[calls // 2]:8.0f} {ts[calls // 10]:8.0f} {ts[9 * calls // 10]:8.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--mb", type=float, default=6.4, help="array size of the cross-core rows")
    args = ap.parse_args()
    import numpy as np
    from threadpoolctl import threadpool_limits

    from ember.backend.numpy.kernels import matmul, threads

    rng = np.random.default_rng(0)
    small = rng.random(1 << 16, dtype=np.float32)
    big = rng.random(int(args.mb * (1 << 20) / 4), dtype=np.float32)
    written = np.empty_like(big)
    a = rng.random((1024, 128), dtype=np.float32)
    b = rng.random((128, 512), dtype=np.float32)
    pool = threads._get_pool()

    def none() -> None:
        pass

    def write() -> None:
        np.multiply(big, 1.0, out=written)

    def exp_share(lo: int, hi: int) -> None:
        np.exp(small[lo:hi])

    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "split, two empty shares",
            lambda: threads._parallel_split(2, 1 << 20, lambda lo, hi: None, False),
            none,
        ),
        ("exp 64K serial", lambda: np.exp(small), none),
        (
            "exp 64K split",
            lambda: threads._parallel_split(small.size, 1 << 20, exp_share, False),
            none,
        ),
        ("maximum after main wrote", lambda: np.maximum(written, 0), write),
        (
            "maximum after pool wrote",
            lambda: np.maximum(written, 0),
            lambda: pool.submit(write).result(),
        ),
        ("matmul pool split", lambda: matmul.matmul(a, b), none),
    ]
    print(f"{'probe':28s} {'p50 µs':>8s} {'p10':>8s} {'p90':>8s}")
    for name, fn, prep in rows:
        print(f"{name:28s} {_percentiles(fn, prep, args.calls)}")
    with threadpool_limits(2, user_api="blas"):
        blas = _percentiles(lambda: np.matmul(a, b), none, args.calls)
        print(f"{'matmul OpenBLAS threads':28s} {blas}")


if __name__ == "__main__":
    main()
