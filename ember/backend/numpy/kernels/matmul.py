"""Matrix products: float32 matrices on MLAS, others split between the kernel pool's threads.

A float32 product of a matrix (or a C-ordered stack of rows) and a matrix, of at least 4 M
multiply-adds, runs as one MLAS ``Gemm`` on ONNX Runtime's intra-op threads
(``ort_gemm.matmul``): its workers spin through a run, where the pool's hand-off costs about
80 µs a split, and MLAS's kernel beat OpenBLAS's at one thread too. The GPT bench's 27 products
a step (1024 rows, K and N 65-512) ran 16.8 -> 14.5 ms at two threads (PyTorch 14.7), the step
1.7 ms faster at two threads and 3.7 at one (paired; bench/RESULTS.md session 26).

Any other product large enough to thread is cut into one share per pool thread: the batch of a
batched product (attention's ``q @ k^T``), else the rows of a matrix product, else its columns.
Each share is one BLAS call made inside ``serial()``, so the BLAS never starts its own threads
from ember's kernels: OpenBLAS's workers busy-wait after each threaded call and took the core
back from the pool's next kernel (a two-thread CNN step ran 1.2x slower than one thread;
bench/RESULTS.md). The BLAS's own thread count stays as it is for NumPy calls outside ember.

Shapes follow ``np.matmul``; anything other than two float32 / float64 operands of one dtype
with at least two dimensions runs as one ``np.matmul``. ``EMBER_CONV=numpy`` (or no
onnxruntime) keeps float32 on OpenBLAS too.
"""

from __future__ import annotations

import math

import numpy as np

from . import ort_gemm
from .blas import serial
from .threads import _parallel_split, num_threads

# multiply-adds below which one thread is faster (LeNet's 3M fc products ran 2x slower split)
_SPLIT_FLOPS = 1 << 23
_BLAS_THREADS_FLOPS = 1 << 18  # OpenBLAS threads a GEMM from here (65536 x its threshold 4)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x @ y`` ``(*, M, K) @ (*, K, N) -> (*, M, N)``, large products on the pool."""
    # one MLAS product on ORT's threads where it takes it (x.size * N: the multiply-adds, a
    # cheap first test, since most float32 products of a small model stay on OpenBLAS)
    if (
        x.dtype == np.float32 == y.dtype
        and y.ndim == 2
        and x.size * y.shape[1] >= ort_gemm.MIN_MACS
    ):
        out = ort_gemm.matmul(x, y)
        if out is not None:
            return out
    if (
        x.ndim < 2
        or y.ndim < 2
        or x.dtype != y.dtype
        or x.dtype not in _FLOATS
        or num_threads() == 1
    ):
        return np.matmul(x, y)
    m, k = x.shape[-2:]
    n = y.shape[-1]
    if y.shape[-2] != k:
        return np.matmul(x, y)  # NumPy raises its shape error (callers checked shapes)
    # the common cases without NumPy's helpers, which cost a few µs a call (LeNet's nine
    # products a step are 3-70 µs each)
    if x.ndim == 2 and y.ndim == 2:
        batch: tuple[int, ...] = ()
    elif x.shape[:-2] == y.shape[:-2]:
        batch = x.shape[:-2]
    else:
        batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    rows = math.prod(batch) * m
    flops = rows * n * k
    if flops < _SPLIT_FLOPS:
        if flops < _BLAS_THREADS_FLOPS:
            return np.matmul(x, y)
        with serial():  # too small to split, large enough for OpenBLAS to thread it
            return np.matmul(x, y)
    out = np.empty((*batch, m, n), dtype=x.dtype)
    if y.ndim == 2 and x.flags.c_contiguous:
        # (*, M, K) @ (K, N): one (rows, K) @ (K, N) product, its rows shared out
        xr, outr = x.reshape(rows, k), out.reshape(rows, n)
        _parallel_split(rows, flops, lambda lo, hi: _mm(xr[lo:hi], y, outr[lo:hi]))
    elif batch and batch[0] >= 2:
        b0 = batch[0]

        def share(lo: int, hi: int) -> None:
            xs = x[lo:hi] if x.ndim == len(batch) + 2 and x.shape[0] == b0 else x
            ys = y[lo:hi] if y.ndim == len(batch) + 2 and y.shape[0] == b0 else y
            _mm(xs, ys, out[lo:hi])

        _parallel_split(b0, flops, share)
    elif m >= n:
        _parallel_split(m, flops, lambda lo, hi: _mm(x[..., lo:hi, :], y, out[..., lo:hi, :]))
    else:
        _parallel_split(n, flops, lambda lo, hi: _mm(x, y[..., lo:hi], out[..., lo:hi]))
    return out


def _mm(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    np.matmul(x, y, out=out)
