"""Core overhead workloads (issue 2): op-chain autodiff cost, plain-op cost, MLP training step.

Each workload is measured against a reference in the same process and run: PyTorch eager CPU
autograd for the op chain, the raw NumPy call for plain ops, and a hand-written NumPy
forward/backward for the MLP step. Results are medians of several repeats.

Usage: ``ember bench overhead [--repeats N] [--json]`` (a table), or
``python bench/overhead.py [--repeats N] [--json]`` (one ``key=value`` line per row).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ember as em


def _median_time(fn: Callable[[], Any], repeats: int, inner: int = 1) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` batches of ``inner`` calls."""
    fn()  # warm up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------- chain
def chain_ember(n_ops: int = 200, size: int = 16) -> Callable[[], Any]:
    """``n_ops`` tiny ops (alternating scale and tanh) forward + backward."""
    device = em.Device.cpu().autodiff()
    x = em.Tensor.random((size, size), em.Distribution.normal(0.0, 1.0), device=device)
    x = x.require_grad()

    def step() -> Any:
        y = x
        for _ in range(n_ops // 2):
            y = (y * 1.01).tanh()
        return x.grad(y.sum().backward())

    return step


def chain_torch(n_ops: int = 200, size: int = 16) -> Callable[[], Any]:
    import torch

    x = torch.randn(size, size, requires_grad=True)

    def step() -> Any:
        y = x
        for _ in range(n_ops // 2):
            y = (y * 1.01).tanh()
        return torch.autograd.grad(y.sum(), x)[0]

    return step


# ---------------------------------------------------------------------------------------- plain
def plain_pairs(size: int = 16) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """(ember plain op, raw NumPy call) pairs."""
    a_np = np.random.default_rng(0).normal(size=(size, size)).astype(np.float32)
    b_np = a_np + 1
    a, b = em.tensor(a_np), em.tensor(b_np)
    return {
        "add": (lambda: a + b, lambda: np.add(a_np, b_np)),
        "mul_scalar": (lambda: a * 2.0, lambda: np.multiply(a_np, 2.0)),
        "exp": (lambda: a.exp(), lambda: np.exp(a_np)),
        "matmul": (lambda: a @ b, lambda: np.matmul(a_np, b_np)),
    }


# ---------------------------------------------------------------------------------------- mlp
MLP_SIZES = (784, 512, 512, 10)


def _mlp_init(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in itertools.pairwise(MLP_SIZES):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
    return params


def _mlp_batch(batch: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, MLP_SIZES[0])).astype(np.float32)
    return x, rng.integers(0, MLP_SIZES[-1], size=batch)


def mlp_ember(batch: int = 128, lr: float = 0.01) -> Callable[[], Any]:
    """One SGD step: relu MLP and cross-entropy (em.nn.functional), through autodiff."""
    from ember.nn import functional as F

    device = em.Device.cpu().autodiff()
    params = [em.tensor(p, device=device).require_grad() for p in _mlp_init()]
    x_np, y_np = _mlp_batch(batch)
    x, y = em.tensor(x_np, device=device), em.tensor(y_np, device=device)
    state = {"params": params}

    def step() -> Any:
        w1, b1, w2, b2, w3, b3 = state["params"]
        h = F.relu(x @ w1 + b1)
        h = F.relu(h @ w2 + b2)
        loss = F.cross_entropy(h @ w3 + b3, y)
        grads = loss.backward()
        state["params"] = [_sgd(p, p.grad(grads), lr) for p in state["params"]]
        return loss

    return step


def _sgd(p: em.Tensor, g: em.Tensor | None, lr: float) -> em.Tensor:
    assert g is not None
    return (p.inner() - g * lr).autodiff().require_grad()


def mlp_numpy(batch: int = 128, lr: float = 0.01) -> Callable[[], Any]:
    """The same step written by hand in NumPy (forward, backward, update)."""
    params = _mlp_init()
    x, y = _mlp_batch(batch)

    def step() -> Any:
        w1, b1, w2, b2, w3, b3 = params
        z1 = x @ w1 + b1
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w2 + b2
        h2 = np.maximum(z2, 0)
        logits = h2 @ w3 + b3
        shifted = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        s = e.sum(axis=1, keepdims=True)
        logp = shifted - np.log(s)
        loss = -logp[np.arange(batch), y].mean()
        g_logits = e / s
        g_logits[np.arange(batch), y] -= 1
        g_logits /= batch
        g_w3 = h2.T @ g_logits
        g_b3 = g_logits.sum(axis=0)
        g_h2 = (g_logits @ w3.T) * (z2 > 0)
        g_w2 = h1.T @ g_h2
        g_b2 = g_h2.sum(axis=0)
        g_h1 = (g_h2 @ w2.T) * (z1 > 0)
        g_w1 = x.T @ g_h1
        g_b1 = g_h1.sum(axis=0)
        grads = (g_w1, g_b1, g_w2, g_b2, g_w3, g_b3)
        params[:] = [p - lr * g for p, g in zip(params, grads)]
        return loss

    return step


# ---------------------------------------------------------------------------------------- run
def run(repeats: int = 15) -> list[dict[str, Any]]:
    """Measure every workload; one row per comparison with ``ratio = ember / reference``."""
    rows: list[dict[str, Any]] = []
    try:
        import torch

        torch.set_num_threads(1)  # tiny tensors: one thread is torch's fastest setting
        t_ref = _median_time(chain_torch(), repeats)
        t_em = _median_time(chain_ember(), repeats)
        rows.append(
            {
                "bench": "chain200_16x16_fwd_bwd",
                "ember_us_per_op": t_em / 200 * 1e6,
                "reference": "torch eager autograd",
                "ref_us_per_op": t_ref / 200 * 1e6,
                "ratio": t_em / t_ref,
                "target": 0.5,
            }
        )
    except ImportError:  # torch is optional: the chain row needs it as the reference
        rows.append({"bench": "chain200_16x16_fwd_bwd", "skipped": "torch not installed"})
    for name, (f_em, f_np) in plain_pairs().items():
        t_em = _median_time(f_em, repeats, inner=2000)
        t_np = _median_time(f_np, repeats, inner=2000)
        rows.append(
            {
                "bench": f"plain_{name}_16x16",
                "ember_us": t_em * 1e6,
                "reference": "raw numpy",
                "ref_us": t_np * 1e6,
                "extra_us": (t_em - t_np) * 1e6,
                "target_extra_us": 1.0,
            }
        )
    t_em = _median_time(mlp_ember(), repeats)
    t_np = _median_time(mlp_numpy(), repeats)
    rows.append(
        {
            "bench": "mlp_784-512-512-10_b128_sgd_step",
            "ember_ms": t_em * 1e3,
            "reference": "hand-written numpy",
            "ref_ms": t_np * 1e3,
            "ratio": t_em / t_np,
            "target": 1.15,
        }
    )
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """One ``key=value`` line per row."""
    lines = []
    for r in rows:
        fields = "  ".join(
            f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
        )
        lines.append(fields)
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = run(args.repeats)
    print(json.dumps(rows, indent=1) if args.json else format_rows(rows))
