"""GPT training-step benchmark on the PyTorch backend: ember vs plain PyTorch eager (and compile).

Three measurements, each a full training step (forward, cross-entropy, backward, AdamW update):

- ``small``: 6 layers, width 512, 8 heads, context 256, batch 32, vocabulary 8192, float32 with
  TF32 matrix products;
- ``gpt2``: 12 layers, width 1024, 16 heads, context 1024, batch 16, vocabulary 32768, bfloat16
  mixed precision (``ember.amp.autocast`` vs ``torch.autocast``), with model TFLOP/s;
- ``memory``: the ``gpt2`` model under ``Balanced`` vs ``Disabled`` gradient checkpointing: peak
  CUDA memory and step time;
- ``checkpointing``: the ``gpt2`` model's memory / time trade-off in one run: ember ``Disabled``,
  ``Balanced``, a budget sweep (``--fractions``), each with the plain and the fused
  (``F.linear_cross_entropy``) head, beside PyTorch eager, ``torch.utils.checkpoint`` around each
  block and ``torch.compile`` with its activation memory budget; ratios against ember
  ``Disabled`` and a peak-memory vs step-time plot (``--plot out.png``, needs matplotlib).

``--captured`` adds ember's step through ``em.capture`` and, on CUDA, the PyTorch step captured
by hand in one CUDA graph (the floor a whole-step capture can reach on the same kernels).

Both models are the same pre-norm GPT-2 (learned positions, tanh GELU, biases, untied LM head)
and call the same kernels (cuBLAS, flash / memory-efficient attention, fused layer norm). The
ember model is built from ``em.nn`` layers and ``em.nn.functional``.

Usage:
    python bench/gpu_gpt.py [--only small,gpt2,memory] [--steps 20] [--rounds 3] [--json out.json]
    python bench/gpu_gpt.py --tiny --device torch:cpu     # a seconds-long smoke run on a CPU
    python bench/gpu_gpt.py --only checkpointing --plot bench/figures/checkpointing_gpt2.png
    python bench/gpu_gpt.py --only checkpointing --captured --rounds 3 \
        --settings balanced+fused_ce+captured,budget_0.3+fused_ce+captured   # medians of rounds
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.nn.functional as TF

import ember as em
import ember.nn.functional as F
from ember import amp
from ember._core.device import parse_device

Strategy = em.GradientCheckpointingStrategy


@dataclass(frozen=True)
class Config:
    """Model, batch and precision of one workload."""

    n_layer: int
    n_embd: int
    n_head: int
    block_size: int
    batch: int
    vocab: int
    bf16: bool

    def n_params(self) -> int:
        c, v = self.n_embd, self.vocab
        per_layer = 12 * c * c + 13 * c  # qkv, proj, fc, fc-proj weights and biases; 2 norms
        return self.n_layer * per_layer + v * c + self.block_size * c + 2 * c + c * v

    def flops_per_step(self) -> float:
        """6 N per token for the weights (no position table) plus 12 L C T for attention."""
        n = self.n_params() - self.block_size * self.n_embd
        tokens = self.batch * self.block_size
        return tokens * (6.0 * n + 12.0 * self.n_layer * self.n_embd * self.block_size)


SMALL = Config(6, 512, 8, 256, 32, 8192, bf16=False)
GPT2 = Config(12, 1024, 16, 1024, 16, 32768, bf16=True)
TINY = Config(2, 64, 4, 32, 4, 128, bf16=False)


# ---------------------------------------------------------------- the ember model
class EmberAttention(em.nn.Module):
    """Causal multi-head self-attention: (B, T, C) -> (B, T, C)."""

    def __init__(self, cfg: Config, device: em.Device) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = em.nn.Linear(cfg.n_embd, 3 * cfg.n_embd, device=device)
        self.proj = em.nn.Linear(cfg.n_embd, cfg.n_embd, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).split(C, 2)
        # (B, T, C) -> (B, H, T, C // H)
        q, k, v = (t.reshape((B, T, H, C // H)).swap_dims(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.swap_dims(1, 2).reshape((B, T, C)))


class EmberBlock(em.nn.Module):
    """Pre-norm block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, cfg: Config, device: em.Device) -> None:
        super().__init__()
        c = cfg.n_embd
        self.ln1 = em.nn.LayerNorm(c, device=device)
        self.attn = EmberAttention(cfg, device)
        self.ln2 = em.nn.LayerNorm(c, device=device)
        self.fc = em.nn.Linear(c, 4 * c, device=device)
        self.fc_proj = em.nn.Linear(4 * c, c, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class EmberGPT(em.nn.Module):
    """Token ids (B, T) -> logits (B, T, vocab)."""

    def __init__(self, cfg: Config, device: em.Device) -> None:
        super().__init__()
        self.wte = em.nn.Embedding(cfg.vocab, cfg.n_embd, device=device)
        self.wpe = em.nn.Embedding(cfg.block_size, cfg.n_embd, device=device)
        self.blocks = em.nn.ModuleList([EmberBlock(cfg, device) for _ in range(cfg.n_layer)])
        self.ln_f = em.nn.LayerNorm(cfg.n_embd, device=device)
        self.lm_head = em.nn.Linear(cfg.n_embd, cfg.vocab, bias=False, device=device)

    def forward(self, idx: em.Tensor) -> em.Tensor:
        return self.lm_head(self.hidden(idx))

    def hidden(self, idx: em.Tensor) -> em.Tensor:
        """The final layer norm's output (B, T, C)."""
        T = idx.shape[1]
        pos = em.Tensor.arange(0, T, device=idx.device.without_autodiff())
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


def ember_step(cfg: Config, fused_ce: bool = False) -> Callable[[Any, Any, Any, Any], Any]:
    """One training step of the ember model; returns (model, loss). ``fused_ce``: the LM head
    and the loss as one ``F.linear_cross_entropy`` row (no logits held)."""
    policy = amp.Policy(em.bfloat16) if cfg.bf16 else None

    def step(model: EmberGPT, optim: Any, idx: em.Tensor, tgt: em.Tensor) -> Any:
        with amp.autocast(policy or em.bfloat16, enabled=policy is not None):
            if fused_ce:
                w = model.lm_head.weight.val()
                loss = F.linear_cross_entropy(model.hidden(idx), w, tgt)
            else:
                logits = model(idx)
                B, T, V = logits.shape
                loss = F.cross_entropy(logits.reshape((B * T, V)), tgt.reshape((B * T,)))
        grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
        return optim.step(3e-4, model, grads), loss

    return step


# ---------------------------------------------------------------- the PyTorch model
class TorchAttention(torch.nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = torch.nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = torch.nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).split(C, 2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class TorchBlock(torch.nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        c = cfg.n_embd
        self.ln1 = torch.nn.LayerNorm(c)
        self.attn = TorchAttention(cfg)
        self.ln2 = torch.nn.LayerNorm(c)
        self.fc = torch.nn.Linear(c, 4 * c)
        self.fc_proj = torch.nn.Linear(4 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TorchGPT(torch.nn.Module):
    def __init__(self, cfg: Config, checkpoint: bool = False) -> None:
        super().__init__()
        self.checkpoint = checkpoint  # torch.utils.checkpoint around each block
        self.wte = torch.nn.Embedding(cfg.vocab, cfg.n_embd)
        self.wpe = torch.nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = torch.nn.ModuleList([TorchBlock(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = torch.nn.LayerNorm(cfg.n_embd)
        self.lm_head = torch.nn.Linear(cfg.n_embd, cfg.vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            if self.checkpoint:
                from torch.utils.checkpoint import checkpoint

                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.lm_head(self.ln_f(x))


def torch_step(
    cfg: Config, model: torch.nn.Module, compiled: bool, graph: bool = False
) -> Callable[..., Any]:
    """One PyTorch training step; ``graph``: the whole step captured by hand in one CUDA graph
    (capturable AdamW; the step's inputs are the arguments of the first call, copied in on
    later calls), the reference a whole-step capture is measured against."""
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, capturable=graph)
    fwd = torch.compile(model) if compiled else model
    dev = next(model.parameters()).device

    def step(idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            logits = fwd(idx)
            loss = TF.cross_entropy(logits.view(-1, cfg.vocab), tgt.view(-1))
        loss.backward()
        optim.step()
        if not graph:
            optim.zero_grad(set_to_none=True)
        return loss

    if not graph:
        return step
    state: dict[str, Any] = {}

    def replay(idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        if not state:
            x, y = idx.clone(), tgt.clone()
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):  # warm-up on a side stream, as CUDA graphs want
                for _ in range(3):
                    optim.zero_grad(set_to_none=True)
                    step(x, y)
            torch.cuda.current_stream(dev).wait_stream(side)
            optim.zero_grad(set_to_none=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                loss = step(x, y)  # gradients live in the graph's pool, rewritten each replay
            state.update(graph=g, x=x, y=y, loss=loss)
        state["x"].copy_(idx)
        state["y"].copy_(tgt)
        state["graph"].replay()
        return state["loss"]

    return replay


# ---------------------------------------------------------------- timing
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(run: Callable[[], Any], device: torch.device, warmup: int, steps: int) -> list[float]:
    """Per-step milliseconds: ``steps`` steps each timed to completion after ``warmup`` steps."""
    for _ in range(warmup):
        run()
    _sync(device)
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        run()
        _sync(device)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _batch(cfg: Config, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(0)
    idx = torch.randint(0, cfg.vocab, (cfg.batch, cfg.block_size), generator=g)
    tgt = torch.randint(0, cfg.vocab, (cfg.batch, cfg.block_size), generator=g)
    return idx.to(device), tgt.to(device)


def _peak_reset(device: torch.device) -> int:
    gc.collect()
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    return int(torch.cuda.memory_allocated(device))


def _peak(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def run_ember(
    cfg: Config,
    dev: em.Device,
    warmup: int,
    steps: int,
    strategy: Any = Strategy.Disabled,
    fused_ce: bool = False,
    captured: bool = False,
) -> dict[str, Any]:
    """Step time and peak memory of the ember model under ``strategy`` (a budget measures its
    graph's Disabled peak on the first, untimed step); ``captured``: the step through
    ``em.capture`` (warm-up and recording happen in the untimed calls)."""
    tdev = dev.b.device
    ad = dev.autodiff()
    if strategy != Strategy.Disabled:
        ad = ad.gradient_checkpointing(budget=strategy)
    model = EmberGPT(cfg, ad)
    optim = em.optim.AdamW(weight_decay=0.01)
    idx_t, tgt_t = _batch(cfg, tdev)
    idx = em.Tensor.from_data(idx_t.cpu().numpy(), device=dev)
    tgt = em.Tensor.from_data(tgt_t.cpu().numpy(), device=dev)
    step = ember_step(cfg, fused_ce)
    if captured:
        step = em.capture(step)
        step(model, optim, idx, tgt)  # the warm-up call; the next one records
    state = {"model": model}

    def run() -> None:
        state["model"], _ = step(state["model"], optim, idx, tgt)

    run()  # optimizer state exists from here on: the baseline of the memory reading
    base = _peak_reset(tdev)
    run()
    peak = _peak(tdev)
    ms = _time(run, tdev, warmup, steps)
    out = _summary(ms, cfg)
    out.update(peak_bytes=peak, resident_bytes=base, step_peak_bytes=peak - base)
    return out


def run_torch(
    cfg: Config,
    tdev: torch.device,
    warmup: int,
    steps: int,
    compiled: bool,
    checkpoint: bool = False,
    memory_budget: float | None = None,
    graph: bool = False,
) -> dict[str, Any]:
    """Step time and peak memory of the PyTorch model (eager, or torch.compile; ``checkpoint``:
    torch.utils.checkpoint per block; ``memory_budget``: torch.compile's activation memory
    budget, ``torch._functorch.config.activation_memory_budget``; ``graph``: the eager step
    captured by hand in one CUDA graph)."""
    if memory_budget is not None:
        import torch._functorch.config as fconfig

        fconfig.activation_memory_budget = memory_budget
        torch._dynamo.reset()
    model = TorchGPT(cfg, checkpoint).to(tdev)
    step = torch_step(cfg, model, compiled, graph)
    idx, tgt = _batch(cfg, tdev)
    step(idx, tgt)
    base = _peak_reset(tdev)
    step(idx, tgt)
    peak = _peak(tdev)
    ms = _time(lambda: step(idx, tgt), tdev, warmup, steps)
    out = _summary(ms, cfg)
    out.update(peak_bytes=peak, resident_bytes=base, step_peak_bytes=peak - base)
    return out


def _over_eager(rounds: list[dict[str, Any]], key: str) -> list[float]:
    """Per round, ``key``'s median step time over PyTorch eager's (rounds where both ran)."""
    return [
        p[key]["ms_median"] / p["torch_eager"]["ms_median"]
        for p in rounds
        if "ms_median" in p.get(key, {}) and "ms_median" in p["torch_eager"]
    ]


def _summary(ms: list[float], cfg: Config) -> dict[str, Any]:
    med = statistics.median(ms)
    return {
        "ms_median": round(med, 3),
        "ms_min": round(min(ms), 3),
        "ms_mean": round(statistics.fmean(ms), 3),
        "tflops": round(cfg.flops_per_step() / (med * 1e-3) / 1e12, 1),
    }


def run_checkpointing(
    cfg: Config,
    dev: em.Device,
    warmup: int,
    steps: int,
    fractions: list[float],
    compile_budgets: list[float],
    plot: str | None,
    captured: bool = False,
    only: set[str] | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    """The memory / time trade-off of every checkpointing setting, in one run.

    Each entry has ``peak_bytes`` (CUDA ``max_memory_allocated`` of a step, parameters and
    optimizer state included), ``step_peak_bytes`` (above what lives between steps) and the
    step time; ``peak_ratio`` / ``time_ratio`` are against ember ``Disabled`` with the plain
    head. A budget bounds the graph's saved values (``fraction`` of their Disabled peak), not
    the parameters, optimizer state and gradients: its ``step_peak_ratio`` is the one to read.
    ``captured``: every ember setting again through ``em.capture`` (``+captured``): the same
    kernels without the host's per-op Python, which recomputation under a budget multiplies.
    ``only``: run just these settings (their names as in the result; ``disabled``, the
    reference, always runs); ``rounds``: run them that many times in turn, ``time_ratio`` then
    the median of each round's ratio to that round's ``disabled`` (``time_ratio_per_round``).
    """
    tdev = dev.b.device
    settings: list[tuple[str, Any, bool]] = []
    for fused in (False, True):
        tag = "+fused_ce" if fused else ""
        settings.append(("disabled" + tag, Strategy.Disabled, fused))
        settings.append(("balanced" + tag, Strategy.Balanced, fused))
        for f in fractions:
            settings.append((f"budget_{f:g}" + tag, Strategy.budget(fraction=f), fused))

    def wanted(name: str) -> bool:
        return only is None or name == "disabled" or name in only

    each: list[dict[str, Any]] = []
    for _ in range(rounds):
        out: dict[str, Any] = {}
        for key, s, fused in settings:
            for cap in (False, True) if captured else (False,):
                name = key + ("+captured" if cap else "")
                if not wanted(name):
                    continue
                out[name] = _guard(
                    name,
                    lambda s=s, fused=fused, cap=cap: run_ember(
                        cfg, dev, warmup, steps, s, fused, cap
                    ),
                )
                gc.collect()
        if wanted("torch_eager"):
            out["torch_eager"] = _guard("eager", lambda: run_torch(cfg, tdev, warmup, steps, False))
        if wanted("torch_checkpoint_per_block"):
            out["torch_checkpoint_per_block"] = _guard(
                "utils.checkpoint",
                lambda: run_torch(cfg, tdev, warmup, steps, False, checkpoint=True),
            )
        for b in compile_budgets:
            if wanted(f"torch_compile_budget_{b:g}"):
                out[f"torch_compile_budget_{b:g}"] = _guard(
                    f"compile {b}",
                    lambda b=b: run_torch(cfg, tdev, warmup, steps, True, memory_budget=b),
                )
        each.append(out)
    out = each[-1]
    ref = out.get("disabled", {})
    for name, r in out.items():
        if "ms_median" in r and "ms_median" in ref:
            ratios = [
                o[name]["ms_median"] / o["disabled"]["ms_median"]
                for o in each
                if "ms_median" in o.get(name, {}) and "ms_median" in o.get("disabled", {})
            ]
            r["time_ratio"] = round(statistics.median(ratios), 3)
            if rounds > 1:
                r["time_ratio_per_round"] = [round(x, 3) for x in ratios]
            if ref.get("peak_bytes"):  # CUDA's allocator counters; 0 on a CPU
                r["peak_ratio"] = round(r["peak_bytes"] / ref["peak_bytes"], 3)
                r["step_peak_ratio"] = round(r["step_peak_bytes"] / ref["step_peak_bytes"], 3)
    if plot:
        _plot(out, plot)
    return out


def _plot(out: dict[str, Any], path: str) -> None:
    """Peak memory vs step time (both against ember Disabled), one point per setting."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[checkpointing] matplotlib is not installed: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 5))
    groups = {
        "ember budget": [k for k in out if k.startswith("budget_") and "fused" not in k],
        "ember budget + fused CE": [k for k in out if k.startswith("budget_") and "fused" in k],
    }
    for label in list(groups):  # with --captured: eager and captured curves apart
        keys = groups.pop(label)
        groups[label] = [k for k in keys if "captured" not in k]
        if any("captured" in k for k in keys):
            groups[label + ", captured"] = [k for k in keys if "captured" in k]
    for label, keys in groups.items():
        pts = sorted(
            (out[k]["peak_ratio"], out[k]["time_ratio"]) for k in keys if "peak_ratio" in out[k]
        )
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    for k, marker in (
        ("balanced", "s"),
        ("balanced+fused_ce", "D"),
        ("balanced+fused_ce+captured", "P"),
        ("torch_checkpoint_per_block", "^"),
        ("torch_eager", "x"),
    ):
        if "peak_ratio" in out.get(k, {}):
            ax.plot(out[k]["peak_ratio"], out[k]["time_ratio"], marker, label=k)
    for k in out:
        if k.startswith("torch_compile_budget") and "peak_ratio" in out[k]:
            ax.plot(out[k]["peak_ratio"], out[k]["time_ratio"], "v", label=k)
    ax.set_xlabel("peak memory / ember Disabled")
    ax.set_ylabel("step time / ember Disabled")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"[checkpointing] plot written to {path}", file=sys.stderr)


def _guard(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one measurement; a failure (torch.compile missing a compiler, say) is reported."""
    try:
        return fn()
    except Exception as e:  # report and keep going: the other measurements still count
        print(f"[{name}] failed: {type(e).__name__}: {e}", file=sys.stderr)
        return {"error": f"{type(e).__name__}: {e}"[:400]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="small,gpt2,memory")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument(
        "--rounds", type=int, default=1, help="alternating ember/eager rounds (and checkpointing)"
    )
    p.add_argument(
        "--settings",
        default="",
        help="checkpointing: only these settings, comma-separated, named as in the output "
        "(balanced+fused_ce, budget_0.3+fused_ce+captured, torch_eager, ...; disabled always)",
    )
    p.add_argument("--tiny", action="store_true", help="tiny sizes, for a smoke run")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--captured", action="store_true", help="also the step through em.capture")
    p.add_argument("--compile-only", action="store_true", help="only the torch.compile runs")
    p.add_argument("--json", default=None)
    p.add_argument(
        "--fractions",
        default="0.9,0.7,0.5,0.4,0.3,0.2",
        help="budget fractions of the checkpointing sweep",
    )
    p.add_argument(
        "--compile-budgets",
        default="0.5,0.3",
        help="torch.compile activation memory budgets of the checkpointing sweep ('' for none)",
    )
    p.add_argument("--plot", default=None, help="checkpointing sweep: write a PNG here")
    args = p.parse_args(argv)
    dev = parse_device(args.device)
    tdev = dev.b.device
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    results: dict[str, Any] = {"device": str(dev), "torch": torch.__version__}
    if tdev.type == "cuda":
        results["gpu"] = torch.cuda.get_device_name(tdev)
    todo = args.only.split(",")
    w, n = args.warmup, args.steps
    for name in todo:
        cfg = {"small": SMALL, "gpt2": GPT2, "memory": GPT2, "checkpointing": GPT2}[name]
        if args.tiny:
            cfg = replace(TINY, bf16=cfg.bf16)
        r: dict[str, Any] = {"config": asdict(cfg), "params": cfg.n_params()}
        if args.compile_only:
            if name in ("small", "gpt2"):
                r["torch_compile"] = _guard(name, lambda c=cfg: run_torch(c, tdev, w, n, True))
        elif name == "checkpointing":
            fractions = [float(f) for f in args.fractions.split(",") if f]
            budgets = (
                [] if args.no_compile else [float(b) for b in args.compile_budgets.split(",") if b]
            )
            r.update(
                run_checkpointing(
                    cfg,
                    dev,
                    w,
                    n,
                    fractions,
                    budgets,
                    args.plot,
                    args.captured,
                    set(filter(None, args.settings.split(","))) or None,
                    args.rounds,
                )
            )
        elif name in ("small", "gpt2"):
            # ember and eager alternate, ``--rounds`` times: drift of the machine hits both
            rounds: list[dict[str, Any]] = []
            for _ in range(args.rounds):
                pair = {
                    "ember": _guard(name, lambda c=cfg: run_ember(c, dev, w, n)),
                    "torch_eager": _guard(name, lambda c=cfg: run_torch(c, tdev, w, n, False)),
                }
                if args.captured:
                    pair["ember_captured"] = _guard(
                        name, lambda c=cfg: run_ember(c, dev, w, n, captured=True)
                    )
                    if tdev.type == "cuda":
                        pair["torch_graph"] = _guard(
                            name, lambda c=cfg: run_torch(c, tdev, w, n, False, graph=True)
                        )
                rounds.append(pair)
                gc.collect()
            r.update(rounds[-1])
            if args.rounds > 1:
                r["rounds"] = rounds
            if not args.no_compile:
                r["torch_compile"] = _guard(name, lambda c=cfg: run_torch(c, tdev, w, n, True))
            for key, out_key in (
                ("ember", "ember_over_eager"),
                ("ember_captured", "captured_over_eager"),
                ("torch_graph", "torch_graph_over_eager"),
            ):
                ratios = _over_eager(rounds, key)
                if ratios:
                    r[out_key] = round(statistics.median(ratios), 3)
                    r[out_key + "_per_round"] = [round(x, 3) for x in ratios]
        else:
            for key, s in (("disabled", Strategy.Disabled), ("balanced", Strategy.Balanced)):
                r[key] = _guard(name, lambda c=cfg, s=s: run_ember(c, dev, w, n, s))
            d, b = r["disabled"], r["balanced"]
            if "ms_median" in d and "ms_median" in b:
                r["time_ratio"] = round(b["ms_median"] / d["ms_median"], 3)
                if d["peak_bytes"]:
                    r["peak_ratio"] = round(b["peak_bytes"] / d["peak_bytes"], 3)
                    r["step_peak_ratio"] = round(b["step_peak_bytes"] / d["step_peak_bytes"], 3)
        results[name] = r
        print(json.dumps({name: r}), flush=True)
        gc.collect()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    assert math.isfinite(GPT2.flops_per_step())
    raise SystemExit(main())
