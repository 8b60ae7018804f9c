"""Optimizer step time: ember's Adam (NumPy backend) vs torch.optim.Adam on the same shapes.

Run: ``OMP_NUM_THREADS=2 python bench/optim_step.py``. Prints medians of 50 steps; reports
numbers, asserts nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

import ember as em


def _median_ms(fn: Callable[[], float], n: int = 50) -> float:
    for _ in range(5):
        fn()
    return statistics.median(fn() for _ in range(n)) * 1e3


def _ember_step(model: em.nn.Module, optim: em.optim.Optimizer, grads: list[np.ndarray]) -> float:
    g = em.optim.GradientsParams()
    for p, a in zip(model.parameters(), grads):
        g.register(p.id, em.Tensor.from_data(a))
    t0 = time.perf_counter()
    optim.step(1e-3, model, g)
    return time.perf_counter() - t0


def main() -> None:
    torch.set_num_threads(2)
    dev = em.Device.cpu().autodiff()
    model = em.nn.Sequential(*[em.nn.Linear(256, 256, device=dev) for _ in range(8)])
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=p.shape).astype(np.float32) for p in model.parameters()]
    tm = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
    for p, g in zip(tm.parameters(), grads):
        p.grad = torch.tensor(g)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-3)

    def torch_step() -> float:
        t0 = time.perf_counter()
        topt.step()
        return time.perf_counter() - t0

    optim = em.optim.Adam()
    e = _median_ms(lambda: _ember_step(model, optim, grads))
    t = _median_ms(torch_step)
    print(f"Adam, 16 params (0.53M float32): ember {e:.2f} ms, torch {t:.2f} ms, ratio {e / t:.2f}")
    small = em.nn.Sequential(*[em.nn.Linear(4, 4, device=dev) for _ in range(50)])
    tiny = [np.ones(p.shape, np.float32) for p in small.parameters()]
    s = _median_ms(lambda: _ember_step(small, optim, tiny))
    print(f"Adam per-parameter overhead (100 tiny params): {s * 10:.1f} us")


if __name__ == "__main__":
    main()
