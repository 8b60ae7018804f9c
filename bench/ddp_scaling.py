"""Data-parallel weak scaling: ember's DistributedDataParallel vs PyTorch's, in the same run.

Every rank trains the GPT of ``bench/gpu_gpt.py`` (its model code is reused) on a fixed per-GPU
batch (weak scaling): the ``gpt2`` size (12 layers, width 1024, context 1024, batch 16 per GPU,
bf16 autocast) or the ``small`` one (6 layers, width 512, fp32/TF32). Rounds alternate ember DDP
(``em.distributed.DistributedDataParallel``, buckets all-reduced during backward) and PyTorch
``DistributedDataParallel`` on the same model, with the same bucket size. Printed per framework:
tokens/s of the whole job, median step time (the slowest rank's median), and the share of
all-reduce time hidden under compute (torch.profiler: the fraction of communication-kernel time
overlapped by compute kernels; on CPU/Gloo the all-reduce ops against the aten ops), then the
ember/PyTorch ratio. Scaling is the tokens/s at N GPUs over the N=1 figure of a separate run.

``--inprocess N`` measures the one-process path instead (``em.distributed.DataParallel``, the
mechanism of ``Learner(devices=[...])``: one replica per device in threads) against
``torch.nn.DataParallel`` on the same devices, global batch N times the per-GPU batch.

Usage:
    torchrun --nproc_per_node=N bench/ddp_scaling.py [--model gpt2|small] [--steps 20]
        [--warmup 5] [--rounds 3] [--bucket-mb 25] [--json out.json]
    python bench/ddp_scaling.py --inprocess N [--model gpt2|small] ...   # one process, N GPUs
    torchrun --nproc_per_node=2 bench/ddp_scaling.py --small             # CPU/Gloo smoke run
    python bench/ddp_scaling.py --small --inprocess 2                    # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as TF

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_gpt
from gpu_gpt import GPT2, SMALL, TINY, Config, EmberGPT, TorchGPT

import ember as em
import ember.nn.functional as F
from ember import amp
from ember.distributed import DataParallel, DistributedDataParallel, ProcessGroup

MODELS = {"gpt2": GPT2, "small": SMALL}
COMM = ("nccl", "gloo", "all_reduce", "allreduce")


def _batch(cfg: Config, rank: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's fixed (rows, T) token ids and targets (different on every rank)."""
    g = torch.Generator(device="cpu").manual_seed(1000 + rank)
    idx = torch.randint(0, cfg.vocab, (rows, cfg.block_size), generator=g)
    tgt = torch.randint(0, cfg.vocab, (rows, cfg.block_size), generator=g)
    return idx, tgt


def _ember_loss(cfg: Config, model: Any, idx: em.Tensor, tgt: em.Tensor) -> em.Tensor:
    policy = amp.Policy(em.bfloat16) if cfg.bf16 else None
    with amp.autocast(policy or em.bfloat16, enabled=policy is not None):
        logits = model(idx)
        B, T, V = logits.shape
        return F.cross_entropy(logits.reshape((B * T, V)), tgt.reshape((B * T,)))


def _torch_loss(cfg: Config, model: Any, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    with torch.autocast(idx.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
        logits = model(idx)
        return TF.cross_entropy(logits.view(-1, cfg.vocab), tgt.view(-1))


# ---------------------------------------------------------------- the steps measured
def ember_ddp(cfg: Config, group: ProcessGroup, bucket_mb: float) -> Callable[[], None]:
    dev = group.device()
    em.seed(0)
    model = group.broadcast_module(EmberGPT(cfg, dev.autodiff()))
    ddp = DistributedDataParallel(group, bucket_mb=bucket_mb)
    optim = em.optim.AdamW(weight_decay=0.01)
    idx_t, tgt_t = _batch(cfg, group.rank, cfg.batch)
    idx = em.Tensor.from_data(idx_t.numpy(), device=dev)
    tgt = em.Tensor.from_data(tgt_t.numpy(), device=dev)
    state = {"model": model}

    def step() -> None:
        grads = ddp.backward(_ember_loss(cfg, state["model"], idx, tgt), state["model"])
        state["model"] = optim.step(3e-4, state["model"], grads)

    return step


def torch_ddp(cfg: Config, group: ProcessGroup, bucket_mb: float) -> Callable[[], None]:
    tdev = group.device().b.device
    torch.manual_seed(0)
    model = TorchGPT(cfg).to(tdev)
    ids = [tdev.index] if tdev.type == "cuda" else None
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=bucket_mb)
    optim = torch.optim.AdamW(ddp.parameters(), lr=3e-4, weight_decay=0.01)
    idx, tgt = (t.to(tdev) for t in _batch(cfg, group.rank, cfg.batch))

    def step() -> None:
        _torch_loss(cfg, ddp, idx, tgt).backward()
        optim.step()
        optim.zero_grad(set_to_none=True)

    return step


def ember_inprocess(cfg: Config, devices: list[em.Device]) -> Callable[[], None]:
    em.seed(0)
    dp = DataParallel(devices)
    model = dp.place(EmberGPT(cfg, devices[0].autodiff()))
    optim = em.optim.AdamW(weight_decay=0.01)
    idx_t, tgt_t = _batch(cfg, 0, cfg.batch * len(devices))
    batch = [em.Tensor.from_data(t.numpy(), device=devices[0]) for t in (idx_t, tgt_t)]
    state = {"model": model}

    def loss_fn(replica: Any, shard: Any) -> tuple[em.Tensor, None, None]:
        return _ember_loss(cfg, replica, shard[0], shard[1]), None, None

    def step() -> None:
        out = dp.backward(state["model"], batch, loss_fn)
        state["model"] = optim.step(3e-4, state["model"], out.grads)

    return step


def torch_inprocess(cfg: Config, devices: list[em.Device]) -> Callable[[], None]:
    tdevs = [d.b.device for d in devices]
    torch.manual_seed(0)
    model = TorchGPT(cfg).to(tdevs[0])
    cuda = tdevs[0].type == "cuda"
    fwd = torch.nn.DataParallel(model, device_ids=[t.index for t in tdevs]) if cuda else model
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    idx, tgt = (t.to(tdevs[0]) for t in _batch(cfg, 0, cfg.batch * len(devices)))

    def step() -> None:
        _torch_loss(cfg, fwd, idx, tgt).backward()
        optim.step()
        optim.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------- measuring
def _time(step: Callable[[], None], tdev: torch.device, warmup: int, steps: int) -> list[float]:
    for _ in range(warmup):
        step()
    gpu_gpt._sync(tdev)
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        gpu_gpt._sync(tdev)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted disjoint span lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def hidden_share(step: Callable[[], None], tdev: torch.device, steps: int = 3) -> float:
    """Fraction of all-reduce time overlapped by compute over ``steps`` profiled steps.

    CUDA: communication kernels (``nccl*``) against every other kernel. CPU: the Gloo
    all-reduce ops against the aten ops. NaN when no communication was seen (one rank).
    """
    from torch.profiler import ProfilerActivity, profile

    cuda = tdev.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        gpu_gpt._sync(tdev)
    comm: list[tuple[float, float]] = []
    compute: list[tuple[float, float]] = []
    for e in prof.events():
        on_gpu = e.device_type == torch.autograd.DeviceType.CUDA
        if on_gpu != cuda:
            continue
        span = (float(e.time_range.start), float(e.time_range.end))
        name = e.name.lower()
        if any(c in name for c in COMM):
            comm.append(span)
        elif cuda or name.startswith("aten::"):
            compute.append(span)
    comm_u, compute_u = _union(comm), _union(compute)
    total = sum(b - a for a, b in comm_u)
    return _overlap(comm_u, compute_u) / total if total > 0 else float("nan")


def _slowest(value: float) -> float:
    """The largest ``value`` over the ranks (every rank's figure; the job runs at the slowest)."""
    if not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def measure(
    steps: dict[str, Callable[[], None]],
    tdev: torch.device,
    tokens_per_step: int,
    args: argparse.Namespace,
) -> dict[str, dict[str, float]]:
    """Alternating rounds of every step; medians, tokens/s and the hidden share."""
    ms: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            ms[name].extend(_time(step, tdev, args.warmup, args.steps))
    out: dict[str, dict[str, float]] = {}
    for name, step in steps.items():
        med = _slowest(statistics.median(ms[name]))
        share = hidden_share(step, tdev) if args.profile else float("nan")
        out[name] = {
            "step_ms": med,
            "tokens_per_s": tokens_per_step / (med / 1e3),
            "hidden_allreduce_share": share,  # this rank's (rank 0 prints)
        }
    return out


def _single_process_env() -> None:
    """Run as a one-rank job when not started by torchrun (N=1 without a launcher)."""
    if "RANK" in os.environ:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(
        RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    p.add_argument("--steps", type=int, default=20, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before each round")
    p.add_argument("--rounds", type=int, default=3, help="alternating ember/PyTorch rounds")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="all-reduce bucket size (MB)")
    p.add_argument("--batch", type=int, default=None, help="per-GPU batch (default: the model's)")
    p.add_argument("--inprocess", type=int, default=0, metavar="N", help="one process, N devices")
    p.add_argument("--small", action="store_true", help="tiny model on CPU (Gloo): a smoke run")
    p.add_argument("--no-profile", dest="profile", action="store_false")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    cfg = TINY if args.small else MODELS[args.model]
    if args.batch is not None:
        cfg = replace(cfg, batch=args.batch)
    if not args.small and not torch.cuda.is_available():
        p.error("needs CUDA GPUs; pass --small for the CPU (Gloo) smoke run")
    if args.small:
        torch.set_num_threads(1)
    else:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
    result: dict[str, Any] = {"model": "tiny" if args.small else args.model, "config": vars(cfg)}
    if args.inprocess:
        n = args.inprocess
        devices = [em.Device.torch("cpu") if args.small else em.Device.cuda(i) for i in range(n)]
        tdev = devices[0].b.device
        steps = {
            "ember DataParallel": ember_inprocess(cfg, devices),
            "torch DataParallel": torch_inprocess(cfg, devices),
        }
        args.profile = False  # no all-reduce in one process
        world, rank = n, 0
    else:
        _single_process_env()
        group = ProcessGroup.from_env("gloo" if args.small else "nccl")
        tdev = group.device().b.device
        steps = {
            "ember DDP": ember_ddp(cfg, group, args.bucket_mb),
            "torch DDP": torch_ddp(cfg, group, args.bucket_mb),
        }
        world, rank = group.world_size, group.rank
    tokens = world * cfg.batch * cfg.block_size
    figures = measure(steps, tdev, tokens, args)
    result.update(world=world, bucket_mb=args.bucket_mb, inprocess=bool(args.inprocess))
    result["figures"] = figures
    names = list(figures)
    ratio = figures[names[0]]["tokens_per_s"] / figures[names[1]]["tokens_per_s"]
    result["ember_over_torch"] = ratio
    if rank == 0:
        kind = f"{world} device(s) in one process" if args.inprocess else f"{world} rank(s)"
        print(f"{result['model']} on {kind}, batch {cfg.batch} x {cfg.block_size} per device")
        for name, f in figures.items():
            print(
                f"  {name:20s} {f['tokens_per_s']:12,.0f} tokens/s  {f['step_ms']:9.2f} ms/step  "
                f"all-reduce hidden {100 * f['hidden_allreduce_share']:5.1f}%"
            )
        print(f"  ember / torch tokens/s: {ratio:.3f}")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
    if not args.inprocess:
        group.barrier()
        group.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
