"""Gradient checkpointing benchmark (issues 4, 15): step time and peak memory against Disabled.

The model is a 12-block pre-norm transformer (d=256, 4 heads, MLP 4d, sequence 128, batch 8) with
layer norm, exact GELU, softmax attention and dropout. The same model in PyTorch, with
``torch.utils.checkpoint`` around each block, is the reference point.

Rows: Balanced and memory budgets (``--fractions``, of the Disabled peak) for the model built
from primitives and from fused rows, each against Disabled measured in the same run, and PyTorch
with ``torch.utils.checkpoint`` per block against plain PyTorch.

Usage: OMP_NUM_THREADS=1 python bench/checkpointing.py [--repeats N] [--blocks N] [--no-attn-drop]
[--no-torch] [--fractions 0.7,0.5,0.3]

Peak memory is measured apart from time: tracemalloc for ember's NumPy backend (NumPy reports
every buffer to it), the resident-set high-water mark of a fresh process for PyTorch CPU.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

import ember as em

Strategy = em.GradientCheckpointingStrategy


@dataclass(frozen=True)
class Config:
    """Model and input sizes."""

    blocks: int = 12
    d_model: int = 256
    num_heads: int = 4
    seq_len: int = 128
    batch: int = 8
    p_drop: float = 0.1
    attn_drop: bool = True
    fused: bool = False  # em.nn.functional rows (layer_norm, softmax, gelu) instead of primitives


# ---------------------------------------------------------------------------- ember model
def _layer_norm(x: em.Tensor, w: em.Tensor, b: em.Tensor, eps: float = 1e-5) -> em.Tensor:
    mu = x.mean_dim(-1)
    xc = x - mu
    var = (xc * xc).mean_dim(-1)
    return xc / (var + eps).sqrt() * w + b


def _gelu(x: em.Tensor) -> em.Tensor:
    # exact GELU: x * (1 + erf(x / sqrt 2)) / 2
    return x * ((x * (1.0 / math.sqrt(2.0))).erf() + 1.0) * 0.5


def _softmax(x: em.Tensor, dim: int) -> em.Tensor:
    # shift by the row max so exp cannot overflow
    e = (x - x.max_dim(dim)).exp()
    return e / e.sum_dim(dim)


def _dropout(x: em.Tensor, p: float) -> em.Tensor:
    if p == 0.0:
        return x
    keep = em.Tensor.random(x.shape, em.Distribution.bernoulli(1.0 - p), device=x.device)
    return x * (keep * (1.0 / (1.0 - p)))  # the scaled mask is an untracked constant


def init_params(cfg: Config, device: em.Device, seed: int = 0) -> list[dict[str, em.Tensor]]:
    """One dict of require-grad parameters per block, on ``device`` (an autodiff device)."""
    rng = np.random.default_rng(seed)
    c = cfg.d_model

    def leaf(*shape: int, scale: float | None = None, fill: float | None = None) -> em.Tensor:
        if fill is not None:
            a = np.full(shape, fill, dtype=np.float32)
        else:
            s = scale if scale is not None else 1.0 / math.sqrt(shape[0])
            a = (rng.standard_normal(shape) * s).astype(np.float32)
        return em.Tensor.from_data(a, device=device).require_grad()

    blocks = []
    for _ in range(cfg.blocks):
        blocks.append(
            {
                "ln1_w": leaf(c, fill=1.0),
                "ln1_b": leaf(c, fill=0.0),
                "wq": leaf(c, c),
                "wk": leaf(c, c),
                "wv": leaf(c, c),
                "wo": leaf(c, c),
                "bo": leaf(c, fill=0.0),
                "ln2_w": leaf(c, fill=1.0),
                "ln2_b": leaf(c, fill=0.0),
                "w1": leaf(c, 4 * c),
                "b1": leaf(4 * c, fill=0.0),
                "w2": leaf(4 * c, c),
                "b2": leaf(c, fill=0.0),
            }
        )
    return blocks


def _ops(cfg: Config) -> tuple[Any, Any, Any, Any]:
    """(layer_norm, softmax, gelu, dropout): fused rows or compositions of primitives."""
    if not cfg.fused:
        return _layer_norm, _softmax, _gelu, _dropout
    import ember.nn.functional as F

    def layer_norm(x: em.Tensor, w: em.Tensor, b: em.Tensor) -> em.Tensor:
        return F.layer_norm(x, (x.shape[-1],), w, b)

    return layer_norm, F.softmax, F.gelu, F.dropout


def block(x: em.Tensor, p: dict[str, em.Tensor], cfg: Config) -> em.Tensor:
    """One pre-norm transformer block: (B, T, C) -> (B, T, C)."""
    B, T, C = x.shape
    H = cfg.num_heads
    D = C // H
    _layer_norm, _softmax, _gelu, _dropout = _ops(cfg)
    h = _layer_norm(x, p["ln1_w"], p["ln1_b"])

    def heads(t: em.Tensor) -> em.Tensor:
        return t.reshape((B, T, H, D)).permute((0, 2, 1, 3))  # (B, T, C) -> (B, H, T, D)

    q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
    att = _softmax((q @ k.swap_dims(-1, -2)) * (1.0 / math.sqrt(D)), -1)  # (B, H, T, T)
    if cfg.attn_drop:
        att = _dropout(att, cfg.p_drop)
    y = (att @ v).permute((0, 2, 1, 3)).reshape((B, T, C))  # (B, H, T, D) -> (B, T, C)
    x = x + _dropout(y @ p["wo"] + p["bo"], cfg.p_drop)
    h = _layer_norm(x, p["ln2_w"], p["ln2_b"])
    h = _gelu(h @ p["w1"] + p["b1"])
    return x + _dropout(h @ p["w2"] + p["b2"], cfg.p_drop)


def forward(x: em.Tensor, params: list[dict[str, em.Tensor]], cfg: Config) -> em.Tensor:
    """The whole model and a scalar loss: mean of the squared output."""
    for p in params:
        x = block(x, p, cfg)
    return (x * x).mean()


def make_input(cfg: Config, device: em.Device, seed: int = 1) -> em.Tensor:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((cfg.batch, cfg.seq_len, cfg.d_model)).astype(np.float32)
    return em.Tensor.from_data(a, device=device)


def ember_step(
    cfg: Config, strategy: Strategy, params: list[dict[str, em.Tensor]], x: em.Tensor
) -> em.Gradients:
    """Forward + backward under ``strategy`` (the input's strategy selects it)."""
    x = x.with_gradient_checkpointing_strategy(strategy)
    return forward(x, params, cfg).backward()


def ember_setup(cfg: Config, strategy: Strategy) -> tuple[list[dict[str, em.Tensor]], em.Tensor]:
    dev = em.Device.cpu().autodiff()
    if strategy != Strategy.Disabled:
        dev = dev.gradient_checkpointing(budget=strategy)
    return init_params(cfg, dev), make_input(cfg, dev)


def ember_peak_bytes(cfg: Config, strategy: Strategy, seed: int = 0) -> int:
    """Peak traced bytes of one forward + backward above what existed before it (parameters);
    a budget's first step (which measures the graph's Disabled peak) runs untraced first."""
    params, x = ember_setup(cfg, strategy)
    if strategy.budgeted:
        em.seed(seed)
        ember_step(cfg, strategy, params, x)
    em.seed(seed)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        grads = ember_step(cfg, strategy, params, x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del grads
    return peak - base


# ---------------------------------------------------------------------------- PyTorch reference
def torch_setup(cfg: Config, seed: int = 0) -> tuple[list[dict[str, Any]], Any]:
    """The same parameters and input as ``ember_setup``, as PyTorch CPU tensors."""
    import torch

    dev = em.Device.cpu().autodiff()
    params = [
        {k: torch.tensor(v.to_numpy(), requires_grad=True) for k, v in p.items()}
        for p in init_params(cfg, dev, seed)
    ]
    return params, torch.tensor(make_input(cfg, dev).to_numpy())


def torch_block(x: Any, p: dict[str, Any], cfg: Config) -> Any:
    """``block`` in PyTorch: (B, T, C) -> (B, T, C)."""
    import torch.nn.functional as F

    B, T, C = x.shape
    H = cfg.num_heads
    D = C // H
    drop = cfg.p_drop
    h = F.layer_norm(x, (C,), p["ln1_w"], p["ln1_b"])

    def heads(t: Any) -> Any:
        return t.reshape(B, T, H, D).permute(0, 2, 1, 3)  # (B, T, C) -> (B, H, T, D)

    q, k, v = heads(h @ p["wq"]), heads(h @ p["wk"]), heads(h @ p["wv"])
    att = F.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D)), dim=-1)
    if cfg.attn_drop:
        att = F.dropout(att, drop)
    y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
    x = x + F.dropout(y @ p["wo"] + p["bo"], drop)
    h = F.layer_norm(x, (C,), p["ln2_w"], p["ln2_b"])
    h = F.gelu(h @ p["w1"] + p["b1"])
    return x + F.dropout(h @ p["w2"] + p["b2"], drop)


def torch_step(cfg: Config, params: list[dict[str, Any]], x: Any, checkpoint: bool) -> None:
    """Forward + backward; ``checkpoint`` wraps each block in ``torch.utils.checkpoint``."""
    from torch.utils.checkpoint import checkpoint as ckpt

    for p in params:
        if checkpoint:
            x = ckpt(torch_block, x, p, cfg, use_reentrant=False)
        else:
            x = torch_block(x, p, cfg)
    (x * x).mean().backward()
    for p in params:
        for t in p.values():
            t.grad = None


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def torch_peak_bytes(cfg: Config, checkpoint: bool) -> int:
    """Peak resident memory of one PyTorch forward + backward above the state before it (Linux).

    Runs in a fresh process whose glibc mmap threshold is pinned low, so freed activations leave
    the resident set at once; the peak (VmHWM) is reset after a warm-up step.
    """
    import os
    import subprocess
    import sys

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        f"import sys; sys.path.insert(0, {here!r}); import checkpointing as c; "
        f"print(c._torch_peak_here(c.Config(**{cfg.__dict__!r}), {checkpoint!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip().splitlines()[-1])


def _torch_peak_here(cfg: Config, checkpoint: bool) -> int:
    import torch

    torch.manual_seed(0)
    params, x = torch_setup(cfg)
    torch_step(cfg, params, x, checkpoint)  # warm up: allocator and library state
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the resident-set high-water mark
    base = _status_bytes("VmRSS")
    torch_step(cfg, params, x, checkpoint)
    return _status_bytes("VmHWM") - base


# ---------------------------------------------------------------------------- the table
def _interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each function, run in turn so drift hits all alike."""
    for fn in fns.values():
        fn()  # warm up
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - w0)
            cpu[k].append(time.process_time() - c0)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fns}


def run(
    cfg: Config, repeats: int, with_torch: bool, fractions: tuple[float, ...] = ()
) -> list[dict[str, Any]]:
    """One row per (framework, variant, setting): step times and peak bytes against the
    framework's plain run (ember Disabled, plain PyTorch) measured in the same run."""
    rows: list[dict[str, Any]] = []
    for fused in (False, True):
        c = Config(**{**cfg.__dict__, "fused": fused})
        settings = [Strategy.Disabled, Strategy.Balanced]
        settings += [Strategy.budget(fraction=f) for f in fractions]
        fns: dict[str, Callable[[], Any]] = {}
        for s in settings:
            params, x = ember_setup(c, s)
            fns[repr(s)] = partial(ember_step, c, s, params, x)
        t = _interleaved(fns, repeats)  # its warm-up step is a budget's measuring step
        base_peak = ember_peak_bytes(c, Strategy.Disabled)
        for s in settings[1:]:
            label = "Balanced" if s is Strategy.Balanced else f"budget {s.fraction:g}"  # type: ignore[attr-defined]
            rows.append(
                {
                    "model": f"ember {'fused' if fused else 'prims'}, {label}",
                    "base": t[repr(Strategy.Disabled)],
                    "ckpt": t[repr(s)],
                    "base_peak": base_peak,
                    "ckpt_peak": ember_peak_bytes(c, s),
                }
            )
    if with_torch:
        tparams, tx = torch_setup(cfg)
        t = _interleaved(
            {
                "plain": lambda: torch_step(cfg, tparams, tx, False),
                "ckpt": lambda: torch_step(cfg, tparams, tx, True),
            },
            repeats,
        )
        rows.append(
            {
                "model": "torch, utils.checkpoint",
                "base": t["plain"],
                "ckpt": t["ckpt"],
                "base_peak": torch_peak_bytes(cfg, False),
                "ckpt_peak": torch_peak_bytes(cfg, True),
            }
        )
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'model':<30}{'base s':>8}{'ckpt s':>8}{'time x':>8}{'cpu x':>7}"
        f"{'base MiB':>10}{'ckpt MiB':>10}{'mem x':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        (bw, bc), (cw, cc) = r["base"], r["ckpt"]
        lines.append(
            f"{r['model']:<30}{bw:8.3f}{cw:8.3f}{cw / bw:8.2f}{cc / bc:7.2f}"
            f"{r['base_peak'] / 2**20:10.1f}{r['ckpt_peak'] / 2**20:10.1f}"
            f"{r['ckpt_peak'] / r['base_peak']:7.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--no-attn-drop", action="store_true", help="dropout on residuals only")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--fractions", default="0.7,0.5,0.3", help="budget fractions ('' for none)")
    args = ap.parse_args()
    fractions = tuple(float(f) for f in args.fractions.split(",") if f)
    cfg = Config(blocks=args.blocks, attn_drop=not args.no_attn_drop)
    print(
        f"{cfg.blocks} blocks, d={cfg.d_model}, heads={cfg.num_heads}, T={cfg.seq_len}, "
        f"B={cfg.batch}, dropout {cfg.p_drop} ({'attention + ' if cfg.attn_drop else ''}"
        f"residual); median of {args.repeats}; base = Disabled (ember) / plain (torch), "
        "ckpt = the row's setting (Balanced, a budget) / torch.utils.checkpoint per block"
    )
    print(format_rows(run(cfg, args.repeats, not args.no_torch, fractions)))


if __name__ == "__main__":
    main()
