"""Host overhead of a GPT training step on torch:cpu at tiny shapes: ember vs plain PyTorch eager.

At these sizes the kernels take microseconds, so the step time is mostly the Python and dispatch
work on the host: the part that leaves a GPU waiting on the small GPT of ``bench/gpu_gpt.py``.
Both sides run the same model (``bench/gpu_gpt.py``'s ``EmberGPT`` / ``TorchGPT``: 6 layers,
width 64, 8 heads, context 32, batch 2) and the same step: forward, cross-entropy, backward,
gradient clipping by global norm 1.0, AdamW (weight decay 0.01).

Usage:
    python bench/host_gpt.py [--vocab 256] [--steps 30] [--rounds 7] [--threads 1] [--profile]
    python bench/host_gpt.py --phases     # forward / backward / optimizer medians of both sides

Prints the median step time of each side per round (rounds alternate ember and torch) and the
median over rounds of the ember / torch ratio. ``--profile`` prints a cProfile of ember steps.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as TF

import ember as em
import ember.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_gpt import Config, EmberGPT, TorchGPT
from train_step import median_ms


def ember_runner(cfg: Config) -> Callable[[], Any]:
    """One ember training step per call (the state is kept in a closure)."""
    dev = em.Device.torch("cpu")
    model = EmberGPT(cfg, dev.autodiff())
    optim = em.optim.AdamW(weight_decay=0.01, grad_clipping=em.optim.GradientClipping.norm(1.0))
    g = torch.Generator().manual_seed(0)
    shape = (cfg.batch, cfg.block_size)
    idx = em.Tensor.from_data(torch.randint(0, cfg.vocab, shape, generator=g).numpy(), device=dev)
    tgt = em.Tensor.from_data(torch.randint(0, cfg.vocab, shape, generator=g).numpy(), device=dev)
    state = {"model": model}

    def step(clock: list[float] | None = None) -> Any:
        m = state["model"]
        logits = m(idx)
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.reshape((B * T, V)), tgt.reshape((B * T,)))
        _tick(clock)
        g = loss.backward()
        _tick(clock)
        grads = em.optim.GradientsParams.from_grads(g, m)
        state["model"] = optim.step(3e-4, m, grads)
        _tick(clock)
        return loss

    return step


def _tick(clock: list[float] | None) -> None:
    if clock is not None:
        clock.append(time.perf_counter())


def torch_runner(cfg: Config) -> Callable[[], Any]:
    """The same step in plain PyTorch eager (foreach AdamW and clip_grad_norm_)."""
    model = TorchGPT(cfg)
    params = list(model.parameters())
    optim = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, cfg.vocab, (cfg.batch, cfg.block_size), generator=g)
    tgt = torch.randint(0, cfg.vocab, (cfg.batch, cfg.block_size), generator=g)

    def step(clock: list[float] | None = None) -> Any:
        logits = model(idx)
        loss = TF.cross_entropy(logits.view(-1, cfg.vocab), tgt.view(-1))
        _tick(clock)
        loss.backward()
        _tick(clock)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        _tick(clock)
        return loss

    return step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--phases", action="store_true", help="median time of each step phase")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = Config(6, 64, 8, 32, 2, args.vocab, bf16=False)
    ember_step, torch_step = ember_runner(cfg), torch_runner(cfg)
    for _ in range(5):
        ember_step()
        torch_step()
    if args.phases:
        for name, run in (("ember", ember_step), ("torch", torch_step)):
            parts: list[list[float]] = [[], [], []]
            for _ in range(args.steps * args.rounds):
                clock = [time.perf_counter()]
                run(clock)
                for i in range(3):
                    parts[i].append((clock[i + 1] - clock[i]) * 1e3)
            f, b, o = (statistics.median(x) for x in parts)
            print(f"{name}: forward+loss {f:.3f} ms  backward {b:.3f} ms  optimizer {o:.3f} ms")
        return 0
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            ember_step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(35)
        return 0
    ratios = []
    for r in range(args.rounds):
        e = median_ms(ember_step, args.steps, warmup=0)
        t = median_ms(torch_step, args.steps, warmup=0)
        ratios.append(e / t)
        print(f"round {r}: ember {e:.3f} ms  torch {t:.3f} ms  ratio {e / t:.3f}", flush=True)
    print(f"median ratio ember / torch eager: {statistics.median(ratios):.3f} ({cfg})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
