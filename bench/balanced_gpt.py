"""What a GPT training step holds at its memory peak, per op and per block (issue 15), on a CPU.

Runs one training step (forward + loss under bf16 autocast, backward, AdamW) of a scaled-down GPT
on the PyTorch CPU backend and accounts for every live torch storage at each backward rule (after
the rule ran: its inputs, its output gradient and its input gradients alive) and at the end of
forward. Each storage is labelled from the graph walked before backward: a kept output / held
input of op X in block k, a residual, a constant (dropout mask, data), a weight's cast, a value
the backward recomputed, a parameter gradient, the resident state (parameters, optimizer state),
or an intermediate gradient. The CPU's own peak (all allocations, the rules' temporaries
included) is read from the torch profiler's memory events.

GPU prediction: each storage's bytes are rescaled to the GPT-2 shape of ``bench/gpu_gpt.py``
by the symbolic dims of its shape (B, T, C, 3C, 4C, V, H, ...; the CPU dims are chosen distinct)
and per-block storages by the layer ratio (not recomputed values: backward caches one bounded
chain at a time), so the predicted GPU step peak is the largest rescaled live total over the
step's snapshots, to which the resident state (parameters, AdamW moments) adds.

Usage:
    python bench/balanced_gpt.py [--model bench|bench-fused|gpt] [--strategy balanced,disabled]
        [--dropout P (gpt)] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import weakref
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.profiler import ProfilerActivity, profile

import ember as em
import ember.nn.functional as F
from ember import amp
from ember._core.device import parse_device
from ember.autodiff import engine
from ember.autodiff import node as node_mod
from ember.autodiff.gradients import Gradients
from ember.checkpoint import recompute
from ember.checkpoint.spelling import parse_strategy
from ember.ops.registry import OPS

sys.path.insert(0, str(Path(__file__).parent))
import gpu_gpt as G

# CPU dims, pairwise distinct so that a shape's dims name themselves
CPU = {"B": 3, "T": 128, "C": 256, "H": 4, "V": 4096, "L": 4}
GPU = {"B": 16, "T": 1024, "C": 1024, "H": 16, "V": 32768, "L": 12}
GPU_RESIDENT = 2.70e9  # bytes between steps on the H200 (fp32 params + AdamW moments), measured


def _dims(d: dict[str, int]) -> dict[str, int]:
    b, t, c, h, v = d["B"], d["T"], d["C"], d["H"], d["V"]
    return {
        "B": b,
        "T": t,
        "BT": b * t,
        "C": c,
        "3C": 3 * c,
        "4C": 4 * c,
        "V": v,
        "H": h,
        "hd": c // h,
        "BH": b * h,
        "BTV": b * t * v,
        "BHT": b * h * t,
    }


_CPU_D = _dims(CPU)
_GPU_D = _dims(GPU)
_BY_SIZE = {v: k for k, v in _CPU_D.items()}
assert len(_BY_SIZE) == len(_CPU_D), "CPU dims must be distinct"


def gpu_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of a tensor of CPU ``shape`` at the GPU shape (unknown dims kept as they are)."""
    n = itemsize
    for s in shape:
        name = _BY_SIZE.get(s)
        n *= _GPU_D[name] if name is not None else s
    return n


class _Grads(Gradients):
    """Gradients that remember themselves (so the probe can tell parameter gradients apart)."""

    __slots__ = ("__weakref__",)
    live: ClassVar[list[weakref.ref[Any]]] = []

    def __init__(self) -> None:
        super().__init__()
        _Grads.live.append(weakref.ref(self))


class Probe:
    """Labels of storages and the live snapshots of one step."""

    def __init__(self, param_block: dict[int, int]) -> None:
        # id(tensor) -> (tensor, label, block, producer node id: a storage takes its producer's)
        self.labels: dict[int, tuple[weakref.ref[Any], str, int, int]] = {}
        self.param_block = param_block  # data_ptr of a parameter -> its block (-1: none)
        self.block_of_node: Callable[[int], int] = lambda i: -1
        self.snaps: list[dict[str, Any]] = []

    def label(self, t: Any, what: str, block: int, nid: int = 0) -> None:
        if isinstance(t, torch.Tensor) and id(t) not in self.labels:
            self.labels[id(t)] = (weakref.ref(t), what, block, nid)

    def snapshot(self, where: str) -> None:
        """Every live torch storage, labelled, with CPU and predicted GPU bytes."""
        by_ptr: dict[int, tuple[str, int]] = {}
        first: dict[int, int] = {}
        for ref, what, block, nid in list(self.labels.values()):
            t = ref()
            if t is not None:
                ptr = t.untyped_storage().data_ptr()
                if ptr not in first or nid < first[ptr]:
                    first[ptr] = nid
                    by_ptr[ptr] = (what, block)
        grads = set()
        for gref in _Grads.live:
            g = gref()
            if g is not None:
                for v in g._store.values():
                    if isinstance(v, torch.Tensor):
                        grads.add(v.untyped_storage().data_ptr())
        storages: dict[int, tuple[int, int, str, int]] = {}
        for o in gc.get_objects():
            if not _is_tensor(o) or o.device.type != "cpu":
                continue
            s = o.untyped_storage()
            ptr, nbytes = s.data_ptr(), int(s.nbytes())
            if nbytes == 0:
                continue
            whole = o.numel() * o.element_size() == nbytes
            pred = gpu_bytes(tuple(o.shape), o.element_size())
            if not whole:  # a view: scale its storage by the view's factor
                pred = pred * nbytes // max(1, o.numel() * o.element_size())
            what, block = by_ptr.get(ptr, ("", -1))
            if not what:
                if ptr in grads:
                    what, block = "param grad", self.param_block.get(ptr, -1)
                else:
                    what = "gradient / other"
            prev = storages.get(ptr)
            if prev is None or (whole and prev[1] != pred):
                storages[ptr] = (nbytes, pred, what, block)
        self.snaps.append({"where": where, "storages": list(storages.values())})


def _is_tensor(o: Any) -> bool:
    return type(o) is torch.Tensor or type(o) is torch.nn.Parameter


def build(kind: str, strategy: str, dropout: float) -> tuple[Any, Any, Callable[..., Any]]:
    """(model, optimizer, loss function) at the CPU dims."""
    dev = parse_device("torch:cpu")
    ad = dev.autodiff().gradient_checkpointing(budget=parse_strategy(strategy))
    em.seed(0)
    if kind in ("bench", "bench-fused"):
        cfg = replace(
            G.GPT2,
            n_layer=CPU["L"],
            n_embd=CPU["C"],
            n_head=CPU["H"],
            block_size=CPU["T"],
            batch=CPU["B"],
            vocab=CPU["V"],
        )
        model = G.EmberGPT(cfg, ad)

        def loss_fn(m: Any, idx: em.Tensor, tgt: em.Tensor) -> em.Tensor:
            if kind == "bench-fused":
                w = m.lm_head.weight.val()
                return F.linear_cross_entropy(m.hidden(idx), w, tgt)
            logits = m(idx)
            b, t, v = logits.shape
            return F.cross_entropy(logits.reshape((b * t, v)), tgt.reshape((b * t,)))

    else:
        from ember.models import GPT, GPTConfig

        gcfg = GPTConfig(
            vocab_size=CPU["V"],
            block_size=CPU["T"],
            n_layer=CPU["L"],
            n_head=CPU["H"],
            n_embd=CPU["C"],
            dropout=dropout,
        )
        model = GPT(gcfg, device=ad)

        def loss_fn(m: Any, idx: em.Tensor, tgt: em.Tensor) -> em.Tensor:
            return m.loss(idx, tgt)

    return model, em.optim.AdamW(weight_decay=0.01), loss_fn


def _blocks(model: Any) -> list[Any]:
    if hasattr(model, "blocks"):
        return list(model.blocks)
    return [getattr(model, f"h{i}") for i in range(model.n_layer)]


def run(kind: str, strategy: str, dropout: float) -> dict[str, Any]:
    model, optim, loss_fn = build(kind, strategy, dropout)
    dev = model.wte.weight.val().device.without_autodiff()
    g = torch.Generator().manual_seed(0)
    idx_t = torch.randint(0, CPU["V"], (CPU["B"], CPU["T"]), generator=g)
    tgt_t = torch.randint(0, CPU["V"], (CPU["B"], CPU["T"]), generator=g)
    idx = em.Tensor.from_data(idx_t.numpy(), device=dev)
    tgt = em.Tensor.from_data(tgt_t.numpy(), device=dev)

    def step(m: Any, probe: Probe | None, prof_mark: bool = False) -> Any:
        bounds: list[int] = []
        hooks = []
        if probe is not None:
            blocks = _blocks(m)
            for b in blocks:
                hooks.append(b.register_forward_pre_hook(lambda mod, a: bounds.append(next(ids))))
            hooks.append(
                blocks[-1].register_forward_hook(lambda mod, a, o: bounds.append(next(ids)))
            )
        if prof_mark:
            _MARKS.append(time.time_ns())
        with amp.autocast(em.bfloat16):
            loss = loss_fn(m, idx, tgt)
        for h in hooks:
            h.remove()
        if probe is not None:

            def block_of(i: int) -> int:
                for k in range(len(bounds) - 1):
                    if bounds[k] <= i < bounds[k + 1]:
                        return k
                return -1

            probe.block_of_node = block_of
            _label_graph(probe, loss)
            probe.snapshot("end of forward")
        gs = loss.backward()
        if prof_mark:
            _MARKS.append(time.time_ns())
        grads = em.optim.GradientsParams.from_grads(gs, m)
        if probe is not None:
            probe.snapshot("after backward")
        return optim.step(3e-4, m, grads)

    ids = node_mod._ids
    model = step(model, None)  # optimizer state exists from here on
    model = step(model, None)  # a fraction budget learns its limit from the first step
    gc.collect()
    param_block = {}
    for name, p in model.named_parameters():
        parts = name.replace("blocks.", "h").split(".")
        blk = int(parts[0][1:]) if parts[0].startswith("h") and parts[0][1:].isdigit() else -1
        param_block[p.val()._raw.untyped_storage().data_ptr()] = blk
    probe = Probe(param_block)
    for o in gc.get_objects():
        if _is_tensor(o):
            probe.label(o, "resident (params, optimizer)", -1)
    live = {o.untyped_storage().data_ptr(): o for o in gc.get_objects() if _is_tensor(o)}
    resident_cpu = sum(int(t.untyped_storage().nbytes()) for t in live.values())
    undo = _instrument(probe)
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step(model, probe, prof_mark=True)
    finally:
        undo()
    cpu_peak = _profiler_peak(prof)
    return _summarise(probe, kind, strategy, cpu_peak, resident_cpu)


def _label_graph(probe: Probe, loss: em.Tensor) -> None:
    """Label what each node of the graph holds: by producer op and block."""
    root = loss._node
    seen = {root}
    stack = [root]
    while stack:
        n = stack.pop()
        name = "leaf" if n.spec is None else n.spec.name
        blk = probe.block_of_node(n.id)
        if n.spec is None:
            if n.output is not None:
                probe.label(n.output, "resident (params, optimizer)", -1)
        else:
            if n.output is not None:
                probe.label(n.output, _role(n), blk, n.id)
            saved = n.saved
            if saved is not None:
                for v in saved if type(saved) is tuple else (saved,):
                    probe.label(v, f"{name} residual", blk, n.id)
            if n.inputs is not None:
                for p, v in zip(n.parents, n.inputs):
                    if v is None:
                        continue
                    if p is None:
                        probe.label(v, f"constant of {name}", blk, n.id)
                    elif p.spec is None:
                        probe.label(v, "resident (params, optimizer)", -1)
                    else:
                        probe.label(v, _role(p), probe.block_of_node(p.id), p.id)
        for p in n.parents:
            if p is not None and p not in seen:
                seen.add(p)
                stack.append(p)


_LAYOUT = {"reshape", "swap_dims", "permute", "index", "split", "slice", "select", "expand"}


def _role(n: Any) -> str:
    """What ``n``'s output is: a weight's cast, an op's output, or a layout op over one."""
    name = n.spec.name
    if name == "cast" and n.parents and n.parents[0] is not None and n.parents[0].spec is None:
        return "cast of a weight"
    if name in _LAYOUT:
        a = n
        while a.spec is not None and a.spec.name in _LAYOUT and a.parents[0] is not None:
            a = a.parents[0]
        base = "leaf" if a.spec is None else a.spec.name
        return f"{name} of {base} output"
    return f"{name} output"


def _instrument(probe: Probe) -> Callable[[], None]:
    """Snapshot after every backward rule; label recomputed values. Returns the undo."""
    saved_specs = {}
    for name, spec in OPS.items():
        bw = spec.backward
        if bw is None:
            continue
        saved_specs[name] = bw

        def wrapped(ctx: Any, g: Any, _bw: Any = bw, _name: str = name) -> Any:
            out = _bw(ctx, g)
            probe.snapshot(f"after {_name} backward")
            return out

        spec.backward = wrapped
    put = recompute.Recompute._put

    def _put(self: Any, n: Any, v: Any, stack: Any) -> None:
        probe.label(v, f"recomputed {n.spec.name}", probe.block_of_node(n.id), n.id)
        put(self, n, v, stack)

    recompute.Recompute._put = _put  # type: ignore[method-assign]
    engine.Gradients = _Grads  # type: ignore[attr-defined,misc]

    def undo() -> None:
        for name, bw in saved_specs.items():
            OPS[name].backward = bw
        recompute.Recompute._put = put  # type: ignore[method-assign]
        engine.Gradients = Gradients  # type: ignore[attr-defined]

    return undo


_MARKS: list[
    int
] = []  # wall-clock ns (the profiler's clock) at the start of forward and the end of backward


def _profiler_peak(prof: Any) -> int:
    """The largest running total of CPU allocations from the start of forward to the end of
    backward (above the total at the start; the optimizer step and the snapshots' own
    bookkeeping fall outside or allocate no torch memory)."""
    evs = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]"
    )
    t0, t1 = _MARKS[-2], _MARKS[-1]
    cur = 0
    start: int | None = None
    peak = 0
    for t, nb in evs:
        if t >= t0 and start is None:
            start = cur
        if t > t1:
            break
        cur += nb
        if start is not None:
            peak = max(peak, cur - start)
    return peak


def _layers(what: str, block: int, ratio: float) -> float:
    """How a storage's count grows from the CPU's layers to the GPU's: per-block values by the
    layer ratio; recomputed values not (backward caches one bounded recompute chain at a time,
    ``MAX_CHAIN`` ops whatever the depth); the rest once."""
    return ratio if block >= 0 and not what.startswith("recomputed") else 1.0


def _summarise(
    probe: Probe, kind: str, strategy: str, cpu_peak: int, resident_cpu: int
) -> dict[str, Any]:
    ratio = GPU["L"] / CPU["L"]
    best: dict[str, Any] | None = None
    best_cpu: dict[str, Any] | None = None
    for s in probe.snaps:
        cpu = gpu = 0.0
        for nbytes, pred, what, block in s["storages"]:
            if what.startswith("resident"):
                continue
            cpu += nbytes
            gpu += pred * _layers(what, block, ratio)
        s["cpu"], s["gpu"] = cpu, gpu
        if best is None or gpu > best["gpu"]:
            best = s
        if best_cpu is None or cpu > best_cpu["cpu"]:
            best_cpu = s
    assert best is not None and best_cpu is not None
    fwd = probe.snaps[0]

    def table(s: dict[str, Any]) -> dict[str, Any]:
        by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        per_block: dict[int, float] = defaultdict(float)
        for nbytes, pred, what, block in s["storages"]:
            if what.startswith("resident"):
                continue
            by[what][0] += nbytes
            by[what][1] += pred * _layers(what, block, ratio)
            if block >= 0:
                per_block[block] += nbytes
        rows = sorted(by.items(), key=lambda kv: -kv[1][1])
        return {
            "where": s["where"],
            "cpu_bytes": s["cpu"],
            "gpu_bytes": s["gpu"],
            "by_label": {k: [int(a), int(b)] for k, (a, b) in rows},
            "per_block_cpu": {k: int(v) for k, v in sorted(per_block.items())},
        }

    return {
        "model": kind,
        "strategy": strategy,
        "cpu_profiler_step_peak": cpu_peak,
        "cpu_resident": resident_cpu,
        "end_of_forward": table(fwd),
        "peak_gpu": table(best),
        "peak_cpu": table(best_cpu),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="bench", choices=("bench", "bench-fused", "gpt"))
    p.add_argument("--strategy", default="balanced,disabled")
    p.add_argument("--dropout", type=float, default=0.0, help="--model gpt only")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    out = {}
    for s in args.strategy.split(","):
        r = run(args.model, s, args.dropout)
        out[s] = r
        _print(r)
    if "balanced" in out and "disabled" in out:
        bal, dis = (
            out[k]["peak_gpu"]["gpu_bytes"] + GPU_RESIDENT for k in ("balanced", "disabled")
        )
        print(
            f"predicted GPT-2-size whole-step peaks (+ {GPU_RESIDENT / 1e9:.2f} GB resident): "
            f"Balanced {bal / 1e9:.2f} GB, Disabled {dis / 1e9:.2f} GB, ratio {bal / dis:.3f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def _print(r: dict[str, Any]) -> None:
    mib = 2.0**20
    gb = 1e9
    peak = r["cpu_profiler_step_peak"] / mib
    print(
        f"== {r['model']} / {r['strategy']}: CPU profiler forward + backward peak {peak:.1f}"
        f" MiB above resident {r['cpu_resident'] / mib:.1f} MiB"
    )
    for key in ("end_of_forward", "peak_cpu", "peak_gpu"):
        t = r[key]
        print(
            f"-- {key} ({t['where']}): CPU {t['cpu_bytes'] / mib:.2f} MiB, "
            f"GPU-shape {t['gpu_bytes'] / gb:.3f} GB; per block CPU MiB "
            + ", ".join(f"{k}: {v / mib:.2f}" for k, v in t["per_block_cpu"].items())
        )
        for k, (c, g) in t["by_label"].items():
            print(f"   {k:<36} {c / mib:9.3f} MiB {g / gb:8.3f} GB")


if __name__ == "__main__":
    raise SystemExit(main())
