"""Bytes of activations an ember graph holds after the forward, Disabled vs Balanced.

Builds the GPT of ``bench/gpu_gpt.py`` (small sizes by default), runs one forward and the loss
under bf16 autocast on the given device, then walks the graph from the loss and adds up the
storage of every saved input and kept output (each storage once; parameters excluded). This
explains peak-memory differences between checkpointing strategies without a GPU.

``--cast-memory-bound`` treats the ``cast`` row as memory-bound for the run (an experiment:
SEMANTICS.md §7 makes it compute-bound).

Usage:
    python bench/saved_bytes.py [--device torch:cpu] [--layers 2] [--width 128] [--context 128]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import torch

import ember as em
import ember.nn.functional as F
from ember import amp
from ember._core.device import parse_device
from ember.ops.registry import OPS

sys.path.insert(0, str(Path(__file__).parent))
import gpu_gpt as G


def saved_bytes(loss: em.Tensor) -> tuple[int, Counter[str]]:
    """Storage bytes held by the graph behind ``loss`` (parameters excluded), total and per op."""
    seen: set[int] = set()
    storages: set[int] = set()
    by_op: Counter[str] = Counter()
    total = 0
    stack = [loss._node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        held = list(n.inputs or ()) + [n.output]
        for v in held:
            if not isinstance(v, torch.Tensor):
                continue
            key = v.untyped_storage().data_ptr()
            if key in storages:
                continue
            storages.add(key)
            if n.spec is not None:  # leaves are the parameters
                total += v.untyped_storage().nbytes()
                by_op[n.spec.name] += v.untyped_storage().nbytes()
        stack.extend(p for p in n.parents if p is not None)
    return total, by_op


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="torch:cpu")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--cast-memory-bound", action="store_true")
    args = p.parse_args(argv)
    if args.cast_memory_bound:
        OPS["cast"].memory_bound = True
    dev = parse_device(args.device)
    cfg = replace(
        G.GPT2,
        n_layer=args.layers,
        n_embd=args.width,
        n_head=4,
        block_size=args.context,
        batch=2,
        vocab=512,
    )
    em.seed(0)
    idx = em.Tensor.random((2, cfg.block_size), em.Distribution.uniform(0, 512), device=dev).int()
    results = {}
    for name, balanced in (("disabled", False), ("balanced", True)):
        ad = dev.autodiff()
        if balanced:
            ad = ad.gradient_checkpointing()
        model = G.EmberGPT(cfg, ad)
        with amp.autocast(em.bfloat16):
            logits = model(idx)
            n = 2 * cfg.block_size
            loss = F.cross_entropy(logits.reshape((n, cfg.vocab)), idx.reshape((n,)))
        total, by_op = saved_bytes(loss)
        results[name] = total
        print(f"{name}: {total / 1e6:.2f} MB  {dict(by_op.most_common(8))}")
    print(f"balanced / disabled = {results['balanced'] / results['disabled']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
