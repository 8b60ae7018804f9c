"""Where a GPT training step's time goes: GPU kernels and host time, ember vs PyTorch eager.

For each workload of ``bench/gpu_gpt.py`` and each implementation, reports per step:

- ``wall_ms``: the step timed to ``torch.cuda.synchronize()`` (median);
- ``host_ms``: time until the step's Python code returns, before the synchronisation (median).
  When it is close to ``wall_ms`` the step is host-bound;
- ``kernels``, ``gpu_ms``: CUDA kernels launched and their summed duration (``torch.profiler``);
- the kernels that take the most GPU time, with their counts.

``--only nanogpt`` profiles the nanoGPT character model of ``bench/capture_gpt.py`` instead:
ember eager, ember captured (``em.capture``), PyTorch eager and the hand-captured PyTorch graph.

Usage:
    python bench/gpu_profile.py [--only small,gpt2,nanogpt] [--steps 10] [--out DIR]
        [--strategies balanced,budget:0.3+fused]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

import ember as em
from ember._core.device import parse_device
from ember.checkpoint.spelling import parse_strategy

sys.path.insert(0, str(Path(__file__).parent))
import capture_gpt as C
import gpu_gpt as G


def _ember_runner(cfg: G.Config, dev: em.Device, setting: str = "disabled") -> Callable[[], Any]:
    """``setting``: a strategy as ``ember train --checkpointing`` spells it (``disabled``,
    ``balanced``, ``budget:0.3``), with ``+fused`` for the fused linear + cross-entropy head."""
    strategy, _, head = setting.partition("+")
    ad = dev.autodiff().gradient_checkpointing(budget=parse_strategy(strategy))
    model = G.EmberGPT(cfg, ad)
    optim = em.optim.AdamW(weight_decay=0.01)
    idx_t, tgt_t = G._batch(cfg, dev.b.device)
    idx = em.Tensor.from_data(idx_t.cpu().numpy(), device=dev)
    tgt = em.Tensor.from_data(tgt_t.cpu().numpy(), device=dev)
    step = G.ember_step(cfg, fused_ce=head == "fused")
    state = {"model": model}

    def run() -> None:
        state["model"], _ = step(state["model"], optim, idx, tgt)

    return run


def _torch_runner(cfg: G.Config, tdev: torch.device) -> Callable[[], Any]:
    model = G.TorchGPT(cfg).to(tdev)
    step = G.torch_step(cfg, model, compiled=False)
    idx, tgt = G._batch(cfg, tdev)
    return lambda: step(idx, tgt)


def _nanogpt_runners(dev: em.Device, tdev: torch.device) -> dict[str, Callable[[], Any]]:
    """The four ways of ``bench/capture_gpt.py`` to run the nanoGPT step, at a fixed rate."""
    w = C.NANOGPT

    def fixed(run: Callable[[float], Any]) -> Callable[[], Any]:
        return lambda: run(w.lr)

    return {
        "ember": lambda: fixed(C.ember_runner(w, dev, False)),
        "ember_captured": lambda: fixed(C.ember_runner(w, dev, True)),
        "torch_eager": lambda: fixed(C.torch_runner(w, tdev, "eager")),
        "torch_graph": lambda: fixed(C.torch_runner(w, tdev, "graph")),
    }


def measure(run: Callable[[], Any], tdev: torch.device, steps: int, top: int) -> dict[str, Any]:
    """Wall and host time per step, then a profiled window of ``steps`` steps."""
    for _ in range(5):
        run()
    torch.cuda.synchronize(tdev)
    wall, host = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        torch.cuda.synchronize(tdev)
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize(tdev)
    kern: dict[str, list[float]] = {}
    spans: list[tuple[float, float, str]] = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kern.setdefault(e.name, []).append(e.time_range.elapsed_us())
            if not e.name.startswith("Optimizer."):  # annotations are not kernels
                spans.append((e.time_range.start, e.time_range.end, e.name))
    total_us = sum(sum(v) for v in kern.values())
    rows = sorted(kern.items(), key=lambda kv: -sum(kv[1]))[:top]
    idle, gaps = _idle(spans)
    return {
        "idle_ms": round(idle / steps / 1e3, 3),
        "gaps": gaps,
        "wall_ms": round(statistics.median(wall), 3),
        "host_ms": round(statistics.median(host), 3),
        "kernels": round(sum(len(v) for v in kern.values()) / steps, 1),
        "gpu_ms": round(total_us / steps / 1e3, 3),
        "top": [
            {"name": k[:110], "n": len(v) / steps, "ms": round(sum(v) / steps / 1e3, 3)}
            for k, v in rows
        ],
    }


def _idle(spans: list[tuple[float, float, str]]) -> tuple[float, list[str]]:
    """Microseconds the GPU sat idle between the first and last kernel, and the longest gaps
    (with the kernels on either side)."""
    spans.sort()
    idle = 0.0
    gaps: list[tuple[float, str]] = []
    end = spans[0][1] if spans else 0.0
    prev = spans[0][2] if spans else ""
    for s, e, name in spans[1:]:
        if s > end:
            idle += s - end
            gaps.append((s - end, f"{s - end:8.1f} us  {prev[:60]}  ->  {name[:60]}"))
        if e > end:
            end, prev = e, name
    gaps.sort(key=lambda g: -g[0])
    return idle, [g[1] for g in gaps[:12]]


def copies(run: Callable[[], Any], tdev: torch.device, steps: int = 2) -> list[str]:
    """Where a step's device copies come from: ``aten::copy_`` calls with CUDA kernels, grouped
    by input shapes and the innermost ember frames that made them."""
    for _ in range(3):
        run()
    torch.cuda.synchronize(tdev)
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts, record_shapes=True, with_stack=True) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize(tdev)
    found: dict[str, int] = {}
    for e in prof.events():
        if e.name != "aten::copy_" or not e.kernels:
            continue
        frames = [f for f in e.stack if "ember/" in f or "bench/" in f][:3]
        key = f"{e.input_shapes} <- {' <- '.join(frames)}"
        found[key] = found.get(key, 0) + 1
    return [f"{n / steps:5.1f}x {k}" for k, n in sorted(found.items(), key=lambda kv: -kv[1])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="small,gpt2")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--top", type=int, default=30)
    p.add_argument(
        "--strategies",
        default="",
        help="also profile ember under these, comma-separated: balanced, budget:F, each with an "
        "optional +fused (the fused linear + cross-entropy head)",
    )
    p.add_argument("--out", default=None, help="folder for profile.json")
    p.add_argument("--copies", action="store_true", help="list ember's device copies and callers")
    args = p.parse_args(argv)
    dev = parse_device("cuda")
    tdev = dev.b.device
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    results: dict[str, Any] = {}
    for name in args.only.split(","):
        runners: dict[str, Callable[[], Callable[[], Any]]]
        if name == "nanogpt":
            runners = _nanogpt_runners(dev, tdev)
        else:
            cfg = {"small": G.SMALL, "gpt2": G.GPT2}[name]
            runners = {
                "ember": lambda c=cfg: _ember_runner(c, dev),
                "torch_eager": lambda c=cfg: _torch_runner(c, tdev),
            }
            for setting in filter(None, args.strategies.split(",")):
                runners[f"ember_{setting}"] = lambda c=cfg, s=setting: _ember_runner(c, dev, s)
        if args.copies:
            print(f"== {name}/ember copies per step")
            for line in copies(runners["ember"](), tdev):
                print("  ", line)
        for impl, make in runners.items():
            r = measure(make(), tdev, args.steps, args.top)
            results[f"{name}/{impl}"] = r
            print(
                f"== {name}/{impl}: wall {r['wall_ms']} ms, host {r['host_ms']} ms, "
                f"{r['kernels']} kernels, gpu {r['gpu_ms']} ms",
                flush=True,
            )
            for row in r["top"]:
                print(f"   {row['ms']:8.3f} ms {row['n']:6.1f}x  {row['name']}")
            print(f"   GPU idle {r['idle_ms']} ms per step; longest gaps:")
            for g in r["gaps"]:
                print("     ", g)
            torch.cuda.empty_cache()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "profile.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
