"""Where an ember training step spends its time: each NumPy-backend kernel's own time, per step.

A study tool for issue 20 (bench/RESULTS.md, session 19), not a benchmark against a reference.
Every public method of ``NumpyBackend`` is wrapped in a timer that counts its own time (a call
inside another kernel counts for the inner one); the rest of the step is ember's Python around
the kernels. Run it at two threads and at one to see which kernels the second thread helps:

  taskset -c 0,1 env EMBER_NUM_THREADS=2 python bench/kernel_times.py --only lenet,cnn
  taskset -c 0,1 env EMBER_NUM_THREADS=1 python bench/kernel_times.py --only lenet,cnn
"""

from __future__ import annotations

import argparse
import collections
import functools
import inspect
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_models as nm

from ember.backend.numpy.backend import NumpyBackend

_own: collections.Counter[str] = collections.Counter()  # seconds spent in each kernel itself
_calls: collections.Counter[str] = collections.Counter()
_stack: list[list[Any]] = []  # [name, seconds in kernels it called]


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        _stack.append([name, 0.0])
        try:
            return fn(*args, **kwargs)
        finally:
            _, inner = _stack.pop()
            took = time.perf_counter() - start
            _own[name] += took - inner
            _calls[name] += 1
            if _stack:
                _stack[-1][1] += took

    return wrapper


def _wrap_backend() -> None:
    for name, value in list(vars(NumpyBackend).items()):
        if name.startswith("_"):
            continue
        if isinstance(value, staticmethod):
            setattr(NumpyBackend, name, staticmethod(_timed(name, value.__func__)))
        elif inspect.isfunction(value):
            setattr(NumpyBackend, name, _timed(name, value))
    # the fused backward kernels (batch norm's, say) are looked up in this table, made when the
    # class was, not as attributes: without these entries their time counted as Python
    table = NumpyBackend.fused_backwards
    for name, fn in list(table.items()):
        table[name] = _timed(name, fn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(nm.NAMES), help="comma-separated workloads")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=10, help="kernels listed per workload")
    args = ap.parse_args()
    _wrap_backend()
    print(f"EMBER_NUM_THREADS={os.environ.get('EMBER_NUM_THREADS', '(unset)')}")
    for name in args.only.split(","):
        step = nm.ember_step(name)
        for _ in range(5):
            step()
        _own.clear()
        _calls.clear()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        wall = (time.perf_counter() - start) / args.steps * 1e3
        kernels = sum(_own.values()) / args.steps * 1e3
        print(f"{name}: step {wall:.2f} ms, kernels {kernels:.2f} ms, Python {wall - kernels:.2f}")
        for kernel, seconds in _own.most_common(args.top):
            per = _calls[kernel] // args.steps
            print(f"  {kernel:30s} {seconds / args.steps * 1e3:7.2f} ms  {per:3d} calls")


if __name__ == "__main__":
    main()
