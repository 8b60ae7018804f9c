"""Whole-step capture benchmark (issue 14): the nanoGPT character model, one training step.

Five ways to run the same step (forward, cross-entropy, backward, clipping at 1.0, AdamW with a
cosine learning rate that changes every step), in one run, on random tokens (no data loading):

- ``ember_eager``: ember's ``GPT`` (``ember.models``), ``em.optim.AdamW`` (the fused kernel);
- ``ember_captured``: the same step through ``em.capture`` (one CUDA graph per signature);
- ``torch_eager``: the same model written in plain PyTorch, ``AdamW(fused=True)``;
- ``torch_compile``: that model's forward through ``torch.compile`` (default mode);
- ``torch_graph``: the PyTorch step captured whole by hand in a ``torch.cuda.CUDAGraph``
  (``AdamW(fused=True, capturable=True)``, the learning rate a device tensor).

Model: 6 layers, 6 heads, width 384, context 256, batch 64, vocabulary 65, dropout 0.2, no
biases, tied embedding; bf16 autocast (parameters and optimizer state float32). Each variant is
timed for ``--steps`` steps after ``--warmup`` (the device synchronised at both ends, so the
host runs ahead as in training); the variants alternate for ``--rounds`` rounds and the medians
of the rounds are reported, with every ratio against ``torch_eager`` of the same run and
``ember_captured`` against ``torch_graph``. On CUDA the peak memory of each variant is reported
too (``ember_captured`` against ``ember_eager``: issue 14 asks for at most 1.1x).

Usage:
    python bench/capture_gpt.py                      # one H200: the figures of bench/RESULTS.md
    python bench/capture_gpt.py --rounds 5 --steps 50 --json capture_gpt.json
    python bench/capture_gpt.py --small              # tiny model on torch CPU, seconds: a smoke run
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

import numpy as np
import torch
import torch.nn.functional as TF

import ember as em
import ember.nn.functional as F
from ember import amp
from ember._core.device import parse_device
from ember.models.gpt import GPT, GPTConfig

GP = em.optim.GradientsParams


@dataclass(frozen=True)
class Work:
    """Model and batch of the benchmark."""

    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    block_size: int = 256
    batch: int = 64
    vocab: int = 65
    dropout: float = 0.2
    bf16: bool = True
    lr: float = 1e-3
    min_lr: float = 1e-4


NANOGPT = Work()
SMALL = replace(NANOGPT, n_layer=2, n_head=2, n_embd=32, block_size=16, batch=4, bf16=False)


def _rates(w: Work, n: int) -> list[float]:
    """A cosine schedule: a different learning rate every step (never a recorded constant)."""
    return [w.min_lr + (w.lr - w.min_lr) * (1 + math.cos(math.pi * i / n)) / 2 for i in range(n)]


# ---------------------------------------------------------------- ember
def ember_model(w: Work, dev: em.Device) -> tuple[GPT, em.optim.AdamW]:
    cfg = GPTConfig(
        vocab_size=w.vocab, block_size=w.block_size, n_layer=w.n_layer, n_head=w.n_head,
        n_embd=w.n_embd, dropout=w.dropout, bias=False,
    )  # fmt: skip
    em.seed(0)
    model = GPT(cfg, device=dev.autodiff())
    clip = em.optim.GradientClipping.norm(1.0)
    return model, em.optim.AdamW(betas=(0.9, 0.99), weight_decay=0.1, grad_clipping=clip)


def ember_train_step(w: Work) -> Callable[..., em.Tensor]:
    policy = amp.Policy(em.bfloat16) if w.bf16 else None

    def train_step(model: GPT, optim: Any, x: em.Tensor, y: em.Tensor, lr: float) -> em.Tensor:
        with amp.autocast(policy or em.bfloat16, enabled=policy is not None):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape((-1, w.vocab)), y.reshape((-1,)))
        optim.step(lr, model, GP.from_grads(loss.backward(), model))
        return loss

    return train_step


def ember_runner(w: Work, dev: em.Device, captured: bool) -> Callable[[float], Any]:
    model, optim = ember_model(w, dev)
    x, y = _tokens(w)
    xe, ye = em.tensor(x, device=dev), em.tensor(y, device=dev)
    step = ember_train_step(w)
    if captured:
        step = em.capture(step)
    return lambda lr: step(model, optim, xe, ye, lr)


# ---------------------------------------------------------------- PyTorch
class TorchBlock(torch.nn.Module):
    def __init__(self, w: Work) -> None:
        super().__init__()
        c = w.n_embd
        self.n_head, self.p = w.n_head, w.dropout
        self.ln1 = torch.nn.LayerNorm(c, bias=False)
        self.qkv = torch.nn.Linear(c, 3 * c, bias=False)
        self.proj = torch.nn.Linear(c, c, bias=False)
        self.ln2 = torch.nn.LayerNorm(c, bias=False)
        self.fc = torch.nn.Linear(c, 4 * c, bias=False)
        self.fc_proj = torch.nn.Linear(4 * c, c, bias=False)
        self.drop = torch.nn.Dropout(w.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.qkv(self.ln1(x)).split(C, 2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        p = self.p if self.training else 0.0
        y = TF.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))
        return x + self.drop(self.fc_proj(TF.gelu(self.fc(self.ln2(x)))))


class TorchGPT(torch.nn.Module):
    def __init__(self, w: Work) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(w.vocab, w.n_embd)
        self.wpe = torch.nn.Embedding(w.block_size, w.n_embd)
        self.drop = torch.nn.Dropout(w.dropout)
        self.blocks = torch.nn.ModuleList([TorchBlock(w) for _ in range(w.n_layer)])
        self.ln_f = torch.nn.LayerNorm(w.n_embd, bias=False)
        self.lm_head = torch.nn.Linear(w.n_embd, w.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as ember's GPT
        for name, t in self.named_parameters():  # GPT-2 initialisation, as ember's GPT
            if t.ndim == 2:
                std = 0.02 / math.sqrt(2 * w.n_layer) if name.endswith("proj.weight") else 0.02
                torch.nn.init.normal_(t, 0.0, std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def torch_runner(w: Work, tdev: torch.device, mode: str) -> Callable[[float], Any]:
    """``mode``: "eager", "compile" or "graph" (the whole step captured by hand)."""
    torch.manual_seed(0)
    model = TorchGPT(w).to(tdev)
    cuda = tdev.type == "cuda"
    graph = mode == "graph"
    lr0: Any = torch.tensor(w.lr, device=tdev) if graph else w.lr
    optim = torch.optim.AdamW(
        model.parameters(), lr=lr0, betas=(0.9, 0.99), weight_decay=0.1,
        fused=cuda, capturable=graph,
    )  # fmt: skip
    fwd = torch.compile(model) if mode == "compile" else model
    x, y = (torch.from_numpy(a).to(tdev) for a in _tokens(w))

    def step() -> torch.Tensor:
        with torch.autocast(tdev.type, dtype=torch.bfloat16, enabled=w.bf16):
            loss = TF.cross_entropy(fwd(x).view(-1, w.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        optim.step()
        return loss

    if not graph:

        def eager(lr: float) -> torch.Tensor:
            for g in optim.param_groups:
                g["lr"] = lr
            out = step()
            optim.zero_grad(set_to_none=True)
            return out

        return eager
    side = torch.cuda.Stream(tdev)
    side.wait_stream(torch.cuda.current_stream(tdev))
    with torch.cuda.stream(side):  # warm-up on a side stream, as CUDA graphs want
        for _ in range(3):
            optim.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream(tdev).wait_stream(side)
    optim.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_loss = step()  # the gradients live in the graph's pool, rewritten each replay
    lr_t = optim.param_groups[0]["lr"]

    def replay(lr: float) -> torch.Tensor:
        lr_t.fill_(lr)
        g.replay()
        return static_loss

    return replay


# ---------------------------------------------------------------- timing
def _tokens(w: Work) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    shape = (w.batch, w.block_size)
    return rng.integers(0, w.vocab, size=shape), rng.integers(0, w.vocab, size=shape)


def _sync(tdev: torch.device) -> None:
    if tdev.type == "cuda":
        torch.cuda.synchronize(tdev)


def _measure(
    run: Callable[[float], Any], tdev: torch.device, w: Work, warmup: int, steps: int
) -> dict[str, float]:
    """ms per step over ``steps`` steps (synchronised at both ends), and the peak memory."""
    rates = _rates(w, warmup + steps)
    for lr in rates[:warmup]:
        run(lr)
    _sync(tdev)
    if tdev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(tdev)
    t0 = time.perf_counter()
    for lr in rates[warmup:]:
        loss = run(lr)
    _sync(tdev)
    ms = (time.perf_counter() - t0) * 1e3 / steps
    out = {"ms": ms, "loss": float(loss.item() if hasattr(loss, "item") else loss)}
    if tdev.type == "cuda":
        out["peak_bytes"] = float(torch.cuda.max_memory_allocated(tdev))
    return out


def _variants(w: Work, dev: em.Device, tdev: torch.device, compile_: bool) -> dict[str, Any]:
    cuda = tdev.type == "cuda"
    out: dict[str, Callable[[], Callable[[float], Any]]] = {
        "ember_eager": lambda: ember_runner(w, dev, False),
        "ember_captured": lambda: ember_runner(w, dev, True),
        "torch_eager": lambda: torch_runner(w, tdev, "eager"),
    }
    if compile_:
        out["torch_compile"] = lambda: torch_runner(w, tdev, "compile")
    if cuda:
        out["torch_graph"] = lambda: torch_runner(w, tdev, "graph")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--small", action="store_true", help="tiny model on torch CPU: a smoke run")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    w = SMALL if args.small else NANOGPT
    dev = parse_device("torch:cpu" if args.small else args.device)
    tdev = dev.b.device  # type: ignore[attr-defined]
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    variants = _variants(w, dev, tdev, compile_=not (args.no_compile or args.small))
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
    for _ in range(args.rounds):  # variants alternate: drift of the machine hits all of them
        for name, make in variants.items():
            try:
                run = make()
                runs[name].append(_measure(run, tdev, w, args.warmup, args.steps))
            except Exception as e:  # report and keep going: the other variants still count
                print(f"[{name}] failed: {type(e).__name__}: {e}", file=sys.stderr)
            del run
            gc.collect()
            if tdev.type == "cuda":
                torch.cuda.empty_cache()
    res: dict[str, Any] = {"work": asdict(w), "device": str(dev), "torch": torch.__version__}
    if tdev.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name(tdev)
    for name, rs in runs.items():
        if rs:
            res[name] = {
                "ms_median": round(statistics.median(r["ms"] for r in rs), 3),
                "ms_rounds": [round(r["ms"], 3) for r in rs],
                "last_loss": round(rs[-1]["loss"], 4),
            }
            if "peak_bytes" in rs[-1]:
                res[name]["peak_mib"] = round(rs[-1]["peak_bytes"] / 2**20, 1)
    ratios: dict[str, float] = {}
    base = res.get("torch_eager", {}).get("ms_median")
    for name in runs:
        if base and name in res and name != "torch_eager":
            ratios[f"{name}/torch_eager"] = round(res[name]["ms_median"] / base, 3)
    if "ember_captured" in res and "torch_graph" in res:
        ratios["ember_captured/torch_graph"] = round(
            res["ember_captured"]["ms_median"] / res["torch_graph"]["ms_median"], 3
        )
    if "ember_captured" in res and "ember_eager" in res:
        ratios["ember_captured/ember_eager"] = round(
            res["ember_captured"]["ms_median"] / res["ember_eager"]["ms_median"], 3
        )
        if "peak_mib" in res["ember_captured"]:
            ratios["peak ember_captured/ember_eager"] = round(
                res["ember_captured"]["peak_mib"] / res["ember_eager"]["peak_mib"], 3
            )
    res["ratios"] = ratios
    print(json.dumps(res, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
