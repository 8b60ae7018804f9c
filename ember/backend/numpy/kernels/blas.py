"""NumPy's BLAS threads, kept out of the way of ember's kernel pool.

ember's NumPy kernels split large work between the threads of their own pool (``pool.py``). A
BLAS call made from a pool thread while the BLAS library also starts its own threads would
oversubscribe the cores (with OpenBLAS's shared thread server the calls even queue behind one
another). So, while a kernel's work is split between the pool's threads, the BLAS runs one thread
per call (``serial()``); outside those regions BLAS keeps its threads, so a plain ``matmul`` on the
calling thread still uses every core. With ``EMBER_NUM_THREADS`` set, BLAS is given that many
threads at the first use too, so one setting governs both; ``EMBER_BLAS_THREADS`` overrides the
BLAS's count alone.

The libraries are found with ``threadpoolctl`` (a dependency); OpenBLAS, the BLAS of NumPy's
wheels, is switched through its own C functions (about a microsecond), any other BLAS through
``threadpoolctl``'s controllers. Without ``threadpoolctl`` nothing is switched.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_Setter = tuple[Callable[[], int], Callable[[int], Any]]

_lock = threading.Lock()
_setters: list[_Setter] | None = None  # found at the first use
_depth = 0  # serial regions open (several Python threads may run kernels at once)
_saved: list[int] = []  # each library's thread count when the outermost region opened


def _openblas(path: str) -> _Setter | None:
    """(get, set) of the OpenBLAS at ``path`` (whatever symbol affixes its build uses)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix in ("", "scipy_"):
        for suffix in ("", "64_", "_64"):
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype = ctypes.c_int
                put.argtypes = [ctypes.c_int]
                put.restype = None
                return get, put
    return None


def _find() -> list[_Setter]:
    """Every BLAS library loaded in the process (NumPy's, and SciPy's when it is loaded)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return []
    found: list[_Setter] = []
    for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
        setter = _openblas(lib.filepath) if lib.internal_api == "openblas" else None
        if setter is None:
            setter = (lib.get_num_threads, lib.set_num_threads)
        found.append(setter)
    return found


def _libraries() -> list[_Setter]:
    global _setters
    if _setters is None:
        with _lock:
            if _setters is None:
                _setters = _find()
                env = os.environ.get("EMBER_BLAS_THREADS") or os.environ.get("EMBER_NUM_THREADS")
                if env:
                    for _, put in _setters:
                        put(max(1, int(env)))
    return _setters


def apply_env() -> None:
    """Give the BLAS ``EMBER_BLAS_THREADS`` threads now, else ``EMBER_NUM_THREADS``, when one is
    set (at import of the kernels, so a kernel that never splits its work runs with that many).
    ``EMBER_BLAS_THREADS=1`` leaves every core to ember's pool (plain products then run on one
    thread)."""
    if os.environ.get("EMBER_BLAS_THREADS") or os.environ.get("EMBER_NUM_THREADS"):
        _libraries()


def threads() -> list[int]:
    """The thread count of each BLAS library found (empty when none can be controlled)."""
    return [get() for get, _ in _libraries()]


@contextmanager
def serial() -> Iterator[None]:
    """BLAS at one thread per call inside the block (nesting and concurrent callers allowed:
    the counts in force when the outermost block opened come back when the last one closes)."""
    global _depth
    libs = _libraries()
    if not libs:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved[:] = [get() for get, _ in libs]
            for (_, put), n in zip(libs, _saved):
                if n != 1:
                    put(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for (_, put), n in zip(libs, _saved):
                    if n != 1:
                        put(n)
