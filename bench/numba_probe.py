"""What Numba would give ember's NumPy kernels: its thread hand-off, a fused elementwise pass,
``exp``, and max pooling as window loops, each against ember's NumPy kernels (issue 20,
bench/RESULTS.md session 19). A study, not a benchmark of ember: Numba is not a dependency,
and without it this script says so and exits.

Rows are medians of ``--calls`` calls in µs. The threading layer is Numba's default (OpenMP
where GNU's libgomp is found); ``NUMBA_THREADING_LAYER=workqueue`` times its sleeping workers.

  taskset -c 0,1 python bench/numba_probe.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("EMBER_NUM_THREADS", "2")

import numpy as np

try:
    import numba
    from numba import njit, prange
except ImportError:
    sys.exit("numba is not installed (pip install numba): nothing to probe")

from ember.backend.numpy.kernels import activations, pooling


def _median_us(fn: Callable[[], Any], calls: int) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


@njit(parallel=True)
def _empty(out: np.ndarray) -> None:
    for i in prange(out.shape[0]):
        out[i] = i


@njit(parallel=True)
def _relu_backward_par(g: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    for i in prange(g.shape[0]):
        out[i] = g[i] * (0.0 if y[i] <= 0 else 1.0)


@njit
def _relu_backward(g: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    for i in range(g.shape[0]):
        out[i] = g[i] * (0.0 if y[i] <= 0 else 1.0)


@njit(parallel=True)
def _exp_par(x: np.ndarray, out: np.ndarray) -> None:
    for i in prange(x.shape[0]):
        out[i] = np.exp(x[i])


@njit
def _windows(out: int, s: int, p: int, d: int, k: int, n: int) -> np.ndarray:
    """Per window of an axis: its first padded position and its first / past-last tap inside."""
    r = np.empty((out, 3), np.int64)
    for o in range(out):
        base = o * s - p
        lo = (-base + d - 1) // d if base < 0 else 0
        last = n - 1 - base
        hi = 0 if last < 0 else min(k, last // d + 1)
        r[o, 0], r[o, 1], r[o, 2] = base, lo, hi
    return r


@njit(parallel=True)
def _max_pool(
    x: np.ndarray, ry: np.ndarray, rx: np.ndarray, d: tuple[int, int], y: np.ndarray
) -> None:
    n, c, h, w = x.shape
    ho, wo = y.shape[2], y.shape[3]
    xf, yf = x.reshape(n * c, h, w), y.reshape(n * c, ho, wo)
    for p in prange(n * c):
        for oy in range(ho):
            for ox in range(wo):
                best = -np.inf
                nan = False
                for ty in range(ry[oy, 1], ry[oy, 2]):
                    row = xf[p, ry[oy, 0] + ty * d[0]]
                    for tx in range(rx[ox, 1], rx[ox, 2]):
                        v = row[rx[ox, 0] + tx * d[1]]
                        best = v if v > best else best
                        nan |= v != v
                yf[p, oy, ox] = np.nan if nan else best


@njit(parallel=True)
def _max_pool_backward(
    g: np.ndarray, x: np.ndarray, ry: np.ndarray, rx: np.ndarray, d: tuple[int, int], gx: np.ndarray
) -> None:
    n, c, h, w = x.shape
    ho, wo = g.shape[2], g.shape[3]
    xf, gf, gxf = x.reshape(n * c, h, w), g.reshape(n * c, ho, wo), gx.reshape(n * c, h, w)
    for p in prange(n * c):
        gxf[p] = 0
        for oy in range(ho):
            for ox in range(wo):
                best = -np.inf
                by = bx = -1
                for ty in range(ry[oy, 1], ry[oy, 2]):
                    iy = ry[oy, 0] + ty * d[0]
                    for tx in range(rx[ox, 1], rx[ox, 2]):
                        ix = rx[ox, 0] + tx * d[1]
                        v = xf[p, iy, ix]
                        # the first tap inside, a greater one, or the first NaN
                        take = (by < 0) | (v > best) | ((v != v) & (best == best))
                        best = v if take else best
                        by = iy if take else by
                        bx = ix if take else bx
                if by >= 0:
                    gxf[p, by, bx] += gf[p, oy, ox]


def _elementwise_rows(size: int, calls: int) -> None:
    rng = np.random.default_rng(size)
    g = rng.standard_normal(size, dtype=np.float32)
    y = rng.standard_normal(size, dtype=np.float32)
    out = np.empty_like(g)
    rows = {
        "relu backward, prange": lambda: _relu_backward_par(g, y, out),
        "relu backward, 1 thread": lambda: _relu_backward(g, y, out),
        "relu backward, ember": lambda: activations.relu_backward(g, y),
        "exp, prange": lambda: _exp_par(g, out),
        "exp, NumPy": lambda: np.exp(g, out=out),
    }
    for name, fn in rows.items():
        print(f"{name:26s} {size:>7d} {_median_us(fn, calls):8.1f}")


def _pool_rows(shape: tuple[int, int, int, int], calls: int) -> None:
    kernel, stride, pad, dil = (2, 2), (2, 2), (0, 0), (1, 1)
    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape, dtype=np.float32)
    want = pooling.max_pool2d(x, kernel, stride, pad, dil)
    gy = rng.standard_normal(want.shape, dtype=np.float32)
    want_gx = pooling.max_pool2d_backward(gy, x, kernel, stride, pad, dil)
    ry = _windows(want.shape[2], stride[0], pad[0], dil[0], kernel[0], shape[2])
    rx = _windows(want.shape[3], stride[1], pad[1], dil[1], kernel[1], shape[3])
    y, gx = np.empty_like(want), np.empty_like(x)
    _max_pool(x, ry, rx, dil, y)
    _max_pool_backward(gy, x, ry, rx, dil, gx)
    same = np.array_equal(y, want) and np.array_equal(gx, want_gx)
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        fwd = _median_us(lambda: _max_pool(x, ry, rx, dil, y), calls)
        bwd = _median_us(lambda: _max_pool_backward(gy, x, ry, rx, dil, gx), calls)
        print(
            f"max pool {shape}, numba {threads}t: forward {fwd:8.1f} backward {bwd:8.1f}"
            f"  (bit-equal to ember: {same})"
        )
    fwd = _median_us(lambda: pooling.max_pool2d(x, kernel, stride, pad, dil), calls)
    bwd = _median_us(lambda: pooling.max_pool2d_backward(gy, x, kernel, stride, pad, dil), calls)
    print(f"max pool {shape}, ember: forward {fwd:8.1f} backward {bwd:8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    two = np.zeros(2)
    _empty(two)
    layer = numba.threading_layer()
    print(f"numba {numba.__version__}, layer {layer}, {numba.get_num_threads()} threads")
    print(f"empty prange of 2          {_median_us(lambda: _empty(two), args.calls):8.1f}")
    for size in (1 << 16, 1 << 19):
        _elementwise_rows(size, args.calls)
    for shape in ((64, 6, 24, 24), (64, 32, 28, 28)):
        _pool_rows(shape, args.calls)


if __name__ == "__main__":
    main()
