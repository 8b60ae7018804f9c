"""Host overhead of a GPT training step on torch:cpu at tiny shapes: ember vs plain PyTorch eager.

At these sizes the kernels take microseconds, so the step time is mostly the Python and dispatch
work on the host: the part that leaves a GPU waiting on the small GPT of ``bench/gpu_gpt.py``.
Both sides run the same model (``bench/gpu_gpt.py``'s ``EmberGPT`` / ``TorchGPT``: 6 layers,
width 64, 8 heads, context 32, batch 2) and the same step: forward, cross-entropy, backward,
gradient clipping by global norm 1.0, AdamW (weight decay 0.01).

Usage:
    python bench/host_gpt.py [--vocab 256] [--steps 30] [--rounds 7] [--threads 1] [--profile]
                             [--layers 6] [--width 64] [--context 32] [--batch 2]
    python bench/host_gpt.py --phases     # per-phase host ms of both sides, per-node us
    python bench/host_gpt.py --phases --width 16 --context 4 --batch 1 --vocab 32  # host-bound

Prints the median step time of each side per round (rounds alternate ember and torch) and the
median over rounds of the ember / torch ratio. ``--profile`` prints a cProfile of ember steps.
``--phases`` splits a step into forward dispatch (a plain copy of the model: no graph), autodiff
recording (the tracked forward less the plain one), backward, ``GradientsParams``, clipping and
the optimizer step, each the median over ``--rounds`` of the median over ``--steps``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
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

PHASES = ("forward", "record", "backward", "grads", "clip", "optim")
_PHASE_NAMES = {
    "forward": "forward dispatch (plain, + loss)",
    "record": "autodiff recording (tracked forward - plain)",
    "backward": "backward",
    "grads": "GradientsParams.from_grads",
    "clip": "clipping (global norm 1.0)",
    "optim": "optimizer step (AdamW)",
}


def ember_runner(cfg: Config) -> Callable[..., Any]:
    """One ember training step per call (the state is kept in a closure).

    ``step(clock)`` appends a ``perf_counter`` after each phase: forward of a plain copy of the
    model (dispatch and kernels, no graph), the tracked forward + loss, backward,
    ``GradientsParams``, clipping, the optimizer step. ``step()`` runs the ordinary step (the
    optimizer clips), with no plain forward.
    """
    dev = em.Device.torch("cpu")
    model = EmberGPT(cfg, dev.autodiff())
    plain = EmberGPT(cfg, dev)  # same shapes, plain parameters: the forward without recording
    clipping = em.optim.GradientClipping.norm(1.0)
    optim = em.optim.AdamW(weight_decay=0.01, grad_clipping=clipping)
    bare = em.optim.AdamW(weight_decay=0.01)  # the phased step clips itself, then this steps
    g = torch.Generator().manual_seed(0)
    shape = (cfg.batch, cfg.block_size)
    idx = em.Tensor.from_data(torch.randint(0, cfg.vocab, shape, generator=g).numpy(), device=dev)
    tgt = em.Tensor.from_data(torch.randint(0, cfg.vocab, shape, generator=g).numpy(), device=dev)
    state = {"model": model}

    def loss_of(m: EmberGPT) -> Any:
        logits = m(idx)
        B, T, V = logits.shape
        return F.cross_entropy(logits.reshape((B * T, V)), tgt.reshape((B * T,)))

    def step(clock: list[float] | None = None) -> Any:
        m = state["model"]
        if clock is None:
            grads = em.optim.GradientsParams.from_grads(loss_of(m).backward(), m)
            state["model"] = optim.step(3e-4, m, grads)
            return None
        loss_of(plain)
        _tick(clock)
        loss = loss_of(m)
        _tick(clock)
        g = loss.backward()
        _tick(clock)
        grads = em.optim.GradientsParams.from_grads(g, m)
        _tick(clock)
        grads = clipping.apply(grads)
        _tick(clock)
        state["model"] = bare.step(3e-4, m, grads)
        _tick(clock)
        return loss

    return step


# what --phases reads: wall time, or with --cpu this process's CPU time (steadier on a shared host)
_clock = time.perf_counter


def _tick(clock: list[float] | None) -> None:
    if clock is not None:
        clock.append(_clock())


def torch_runner(cfg: Config) -> Callable[..., Any]:
    """The same step in plain PyTorch eager (foreach AdamW and clip_grad_norm_); phased as
    ``ember_runner``'s (the plain forward under ``no_grad``, no ``GradientsParams``)."""
    model = TorchGPT(cfg)
    params = list(model.parameters())
    optim = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, cfg.vocab, (cfg.batch, cfg.block_size), generator=g)
    tgt = torch.randint(0, cfg.vocab, (cfg.batch, cfg.block_size), generator=g)

    def loss_of() -> Any:
        logits = model(idx)
        return TF.cross_entropy(logits.view(-1, cfg.vocab), tgt.view(-1))

    def step(clock: list[float] | None = None) -> Any:
        if clock is not None:
            with torch.no_grad():
                loss_of()
            _tick(clock)
        loss = loss_of()
        _tick(clock)
        loss.backward()
        _tick(clock)
        _tick(clock)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        _tick(clock)
        optim.step()
        optim.zero_grad(set_to_none=True)
        _tick(clock)
        return loss

    return step


def nodes_per_step(step: Callable[..., Any]) -> int:
    """Graph nodes one ember step records (ops of the tracked forward + loss, leaves included)."""
    from ember.autodiff import node

    first = node.Node.leaf(None, None).id
    step()
    return node.Node.leaf(None, None).id - first - 1


def gc_cost(step: Callable[..., Any], steps: int) -> tuple[list[float], float]:
    """Collections per step of each generation and the ms per step spent in them (the cyclic
    garbage collector's pauses: a step's medians leave out the rare full collection)."""
    gc.collect()
    count = [0, 0, 0]
    spent = [0.0]
    start = [0.0]

    def hook(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            start[0] = _clock()
        else:
            count[info["generation"]] += 1
            spent[0] += _clock() - start[0]

    gc.callbacks.append(hook)
    try:
        for _ in range(steps):
            step()
    finally:
        gc.callbacks.remove(hook)
    return [c / steps for c in count], spent[0] / steps * 1e3


def phases(ember_step: Callable[..., Any], torch_step: Callable[..., Any], cfg: Any) -> None:
    """Print the median (over rounds of ``cfg.steps`` steps) of each phase's host ms, both sides,
    and per recorded node µs of the ember forward, recording and backward."""
    n = nodes_per_step(ember_step)
    med: dict[str, list[float]] = {}
    for name, run in (("ember", ember_step), ("torch", torch_step)):
        rounds: list[list[float]] = [[] for _ in PHASES]
        for _ in range(cfg.rounds):
            parts: list[list[float]] = [[] for _ in PHASES]
            for _ in range(cfg.steps):
                clock = [_clock()]
                run(clock)
                for i in range(len(PHASES)):
                    parts[i].append((clock[i + 1] - clock[i]) * 1e3)
            for i, x in enumerate(parts):
                rounds[i].append(statistics.median(x))
        med[name] = [statistics.median(r) for r in rounds]
    e, t = med["ember"], med["torch"]
    t[1] -= t[0]  # torch's recording: its grad-mode forward less its no_grad forward
    e[1] -= e[0]
    print(f"{'phase (host ms, median of rounds)':46s} {'ember':>8s} {'torch':>8s}")
    for i, key in enumerate(PHASES):
        print(f"{_PHASE_NAMES[key]:46s} {e[i]:8.3f} {t[i]:8.3f}")
    # forward + recording is the tracked forward: the sum is one ordinary training step
    print(f"{'training step (sum)':46s} {sum(e):8.3f} {sum(t):8.3f}")
    print(
        f"ember per recorded node ({n} a step): forward {e[0] / n * 1e3:.1f} us, recording "
        f"{e[1] / n * 1e3:.1f} us, backward {e[2] / n * 1e3:.1f} us"
    )
    k = cfg.gc_steps
    for name, run in (("ember", ember_step), ("torch", torch_step)):
        per, ms = gc_cost(run, k)
        gens = ", ".join(f"gen{g} {c:.3f}" for g, c in enumerate(per))
        print(f"{name} garbage collections per step over {k} steps: {gens}; {ms:.3f} ms a step")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=64, help="n_embd (8 heads)")
    p.add_argument("--context", type=int, default=32, help="block size (tokens per row)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--phases", action="store_true", help="median time of each step phase")
    p.add_argument("--gc-steps", type=int, default=1000, help="steps of --phases' GC count")
    p.add_argument("--cpu", action="store_true", help="--phases in process CPU time, not wall")
    args = p.parse_args(argv)
    if args.cpu:
        global _clock
        _clock = time.process_time
    torch.set_num_threads(args.threads)
    cfg = Config(args.layers, args.width, 8, args.context, args.batch, args.vocab, bf16=False)
    ember_step, torch_step = ember_runner(cfg), torch_runner(cfg)
    for _ in range(5):
        ember_step()
        torch_step()
    if args.phases:
        phases(ember_step, torch_step, args)
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
