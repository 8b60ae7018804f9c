"""What a training step's CUDA memory peak holds, by the ember code that allocated it.

Records one step's allocator trace (``torch.cuda.memory._record_memory_history``, Python
frames), replays it to the step's largest total, and prints the blocks allocated during the step
that are live there, grouped by their innermost ember (or bench) frames, largest first. What was
allocated before the step (parameters, optimizer state) is the ``base``. This is how the 128 MiB
buffer of ``torch.sum``'s reduction was found at the GPT-2-size step's backward peak
(bench/RESULTS.md, eighth session).

Usage:
    python bench/gpu_peak.py [--only gpt2|small] [--strategies balanced+fused,budget:0.3+fused]
        [--depth 4] [--top 25]
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Event = dict[str, Any]  # one entry of a snapshot's device trace


@dataclass
class Peak:
    """The replayed peak: ``bytes`` above the step's start, at trace event ``index``, and the
    live blocks allocated during the step there, as ``groups`` (frames key -> block sizes)."""

    bytes: int = 0
    index: int = -1
    groups: dict[str, list[int]] = field(default_factory=dict)


def frames_key(frames: Sequence[dict[str, Any]], depth: int = 4) -> str:
    """The innermost ``depth`` ember / bench frames of an allocation, innermost first."""
    ours = [f for f in frames if "ember/" in f["filename"] or "bench/" in f["filename"]]
    return " <- ".join(
        f"{f['filename'].split('ember/')[-1]}:{f['line']}:{f['name']}" for f in ours[:depth]
    )


def find_peak(trace: Sequence[Event], depth: int = 4) -> Peak:
    """Replay ``alloc`` / ``free_completed`` events: the largest running total and what was live
    then (frees of blocks allocated before the trace lower the total too)."""
    total = best = 0
    at = -1
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            total += e["size"]
            if total > best:
                best, at = total, i
        elif e["action"] == "free_completed":
            total -= e["size"]
    live: dict[int, Event] = {}
    for e in trace[: at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    groups: dict[str, list[int]] = defaultdict(list)
    for e in live.values():
        groups[frames_key(e.get("frames", []), depth)].append(e["size"])
    return Peak(best, at, dict(groups))


def report(peak: Peak, label: str, base: int, top: int = 25) -> list[str]:
    """Lines of a peak's composition, largest group first."""
    mib = 2**20
    lines = [
        f"== {label}: peak {(base + peak.bytes) / 1e9:.3f} GB = base {base / 1e9:.3f} GB + "
        f"{peak.bytes / mib:.1f} MiB during the step"
    ]
    for k, sizes in sorted(peak.groups.items(), key=lambda kv: -sum(kv[1]))[:top]:
        big = ", ".join(f"{s / mib:.0f}" for s in sorted(sizes, reverse=True)[:6])
        lines.append(f"  {sum(sizes) / mib:9.1f} MiB {len(sizes):4d}x  {k}  [{big}]")
    return lines


def record_step(run: Callable[[], Any], warmup: int = 3) -> tuple[list[Event], int]:
    """One step's trace after ``warmup`` steps, and the bytes allocated before it."""
    import torch

    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=500_000, stacks="python")
    run()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    device = torch.cuda.current_device()
    return list(snap["device_traces"][device]), base


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="gpt2", choices=["gpt2", "small"])
    p.add_argument("--strategies", default="balanced+fused", help="as gpu_profile.py spells them")
    p.add_argument("--depth", type=int, default=4, help="ember frames per group key")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    import gpu_gpt as G
    import gpu_profile as P

    from ember._core.device import parse_device

    dev = parse_device("cuda")
    cfg = {"gpt2": G.GPT2, "small": G.SMALL}[args.only]
    for setting in args.strategies.split(","):
        trace, base = record_step(P._ember_runner(cfg, dev, setting))
        print("\n".join(report(find_peak(trace, args.depth), setting, base, args.top)), flush=True)
        gc.collect()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
