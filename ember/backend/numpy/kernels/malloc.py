"""glibc's allocator told to keep freed activation-sized blocks for reuse.

A NumPy training step allocates and frees the same few-MiB arrays (activations, im2col columns,
gradients) every step. glibc serves such blocks with ``mmap`` and returns them with ``munmap``,
or trims them off the heap's top once they are freed, so every step touches fresh pages: on a
two-core machine the kernel's page-fault handling was 25-35% of a conv net's step (``sys`` time
3 ms of an 11 ms LeNet step, 38 ms of a 100 ms ResNet step; bench/RESULTS.md). Raising the
``mmap`` threshold to its ceiling and keeping the freed top of the heap lets the next step reuse
those pages, as PyTorch's CPU caching of large blocks does; the process's peak memory is
unchanged (freed blocks are only kept, never added).

Applied once, at the NumPy backend's import, on glibc only (elsewhere nothing changes). Set
``EMBER_MALLOC=default`` before ember is imported to leave the allocator as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20  # glibc's ceiling on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 1 << 30  # keep up to this much freed memory at the heap's top
TOP_PAD = 64 << 20  # grow the heap in steps this large (fewer brk calls)

_applied: bool | None = None


def tune() -> bool:
    """Set the allocator's thresholds (once per process); whether they were set."""
    global _applied
    if _applied is None:
        _applied = _set()
    return _applied


def _set() -> bool:
    if os.environ.get("EMBER_MALLOC", "").lower() == "default" or not sys.platform.startswith(
        "linux"
    ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = [
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        mallopt(_M_TOP_PAD, TOP_PAD),
    ]
    return all(r == 1 for r in done)  # mallopt returns 1 on success
