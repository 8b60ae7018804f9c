"""The thread pool and row blocking shared by the NumPy nn kernels.

Row-wise kernels over large arrays (softmax, log-softmax, cross-entropy) process cache-sized row
blocks on a small thread pool (NumPy releases the GIL inside ufuncs); convolutions and pooling
split their work into one contiguous share per thread. ``EMBER_NUM_THREADS`` sets the pool size
(and NumPy's BLAS threads, see ``blas.py``); while work is split between the pool's threads, BLAS
runs one thread per call, so the two never oversubscribe the cores.
"""

from __future__ import annotations

import contextvars
import math
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import numpy as np

from .blas import apply_env, serial

_BLOCK_ELEMS = 1 << 17  # elements per row block: 512 KiB of float32, inside L2
_PARALLEL_MIN = 1 << 16  # below this many elements one thread is faster


_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def num_threads() -> int:
    """Threads for the row-blocked kernels: ``EMBER_NUM_THREADS``, else the CPU count (max 8)."""
    env = os.environ.get("EMBER_NUM_THREADS")
    if env:
        return max(1, int(env))
    return _CPU_THREADS


_CPU_THREADS = max(1, min(os.cpu_count() or 1, 8))  # read once: kernels ask on every call
apply_env()


def _parallel_rows(rows: int, cols: int, fn: Callable[[int, int], None]) -> None:
    """Call ``fn(lo, hi)`` over cache-sized row blocks of ``range(rows)`` on a thread pool
    (on the calling thread alone inside another kernel's share)."""
    block = max(1, _BLOCK_ELEMS // max(cols, 1))
    n = num_threads()
    if n == 1 or rows * cols < _PARALLEL_MIN or rows < 2 or _in_share():
        for lo in range(0, rows, block):
            fn(lo, min(lo + block, rows))
        return
    per = -(-rows // n)

    def work(start: int, stop: int) -> None:
        for lo in range(start, stop, block):
            fn(lo, min(lo + block, stop))

    with serial():
        futures = [_submit(_share, work, s, min(s + per, rows)) for s in range(per, rows, per)]
        _share(work, 0, per)  # the calling thread takes the first share
        for f in futures:
            f.result()


_serial = threading.local()  # .on: inside a share of split work, which must not split again


def _in_share() -> bool:
    """Whether this thread runs a share of split work (its kernels then run unsplit)."""
    return getattr(_serial, "on", False)


@contextmanager
def _as_share() -> Iterator[None]:
    """The block runs as one share of split work: the kernels it calls run unsplit (the outer
    state comes back after it, so shares nest)."""
    outer = _in_share()
    _serial.on = True
    try:
        yield
    finally:
        _serial.on = outer


def _share(fn: Callable[[int, int], None], lo: int, hi: int) -> None:
    """``fn(lo, hi)`` as one share of split work."""
    with _as_share():
        fn(lo, hi)


def _call_threads() -> int:
    """The threads a library call (ONNX Runtime's intra-op pool) may use now: one inside a share
    of split work, whose threads hold the cores, else ``num_threads()``."""
    return 1 if _in_share() else num_threads()


def _parallel_split(n: int, elems: int, fn: Callable[[int, int], None], blas: bool = True) -> None:
    """Call ``fn(lo, hi)`` on one contiguous share of ``range(n)`` per thread (``elems``: the
    total work in elements, below ``_PARALLEL_MIN`` it all runs on the calling thread).
    ``blas=False`` says ``fn`` makes no BLAS call: the BLAS threads are then left as they are
    (each switch costs the next threaded BLAS call a wake-up)."""
    pool = num_threads()
    nested = _in_share()
    if min(pool, n) <= 1 or elems < _PARALLEL_MIN or nested:
        # on this thread alone; with a pool, the BLAS serial too (no BLAS workers left spinning)
        with serial() if blas and pool > 1 and not nested else nullcontext():
            fn(0, n)
        return
    threads = min(pool, n)
    per = -(-n // threads)
    with serial() if blas else nullcontext():
        futures = [_submit(_share, fn, lo, min(lo + per, n)) for lo in range(per, n, per)]
        _share(fn, 0, per)
        for f in futures:
            f.result()


_T = TypeVar("_T")


def _submit(fn: Callable[..., _T], *args: Any) -> Future[_T]:
    """``fn(*args)`` on the pool, in the caller's context: NumPy's error state (``np.errstate``
    is a context variable) holds there as on the calling thread, so a share of the work warns,
    raises or keeps quiet exactly as the caller asked."""
    return _get_pool().submit(contextvars.copy_context().run, fn, *args)


def _get_pool() -> ThreadPoolExecutor:
    global _pool, _pool_size
    n = num_threads()
    if _pool is None or _pool_size != n:
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ember-np")
        _pool_size = n
    return _pool


def _as_rows(x: np.ndarray, dim: int) -> np.ndarray | None:
    """``x`` as a C-contiguous (R, C) view when ``dim`` is its last axis, else ``None``."""
    if dim != x.ndim - 1 or not x.flags.c_contiguous or x.ndim == 0:
        return None
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _unsplit(fn: Callable[[], _T]) -> _T:
    """Run ``fn`` on this thread with ``_parallel_split`` serial inside it."""
    with _as_share():
        return fn()


_U = TypeVar("_U")


def _at_once(first: Callable[[], _T], second: Callable[[], _U]) -> tuple[_T, _U]:
    """``first()`` on this thread and ``second()`` on a pool thread at the same time, each as one
    share (its kernels unsplit, BLAS on one thread): two independent halves of a kernel. One
    after the other on this thread with a pool of one or inside another share."""
    if num_threads() == 1 or _in_share():
        return first(), second()
    with serial():
        later = _submit(_unsplit, second)
        return _unsplit(first), later.result()
