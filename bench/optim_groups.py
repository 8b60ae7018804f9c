"""Parameter groups' cost: ember AdamW with no groups vs the two no-decay groups, against
torch.optim.AdamW (the same two groups) measured in the same run.

Run: ``OMP_NUM_THREADS=2 python bench/optim_groups.py [--device numpy|torch] [--rounds 5]``.
Prints medians (ms per step) and the ratios grouped / ungrouped and ember / torch; asserts
nothing. The fused ``adam_many`` path runs once per group and device, so on torch the grouped
step makes two multi-tensor calls instead of one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import alternating_ms

import ember as em


class Block(em.nn.Module):
    def __init__(self, d: int, device: em.Device) -> None:
        super().__init__()
        self.norm = em.nn.LayerNorm(d, device=device)
        self.fc = em.nn.Linear(d, d, device=device)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["numpy", "torch"], default="numpy")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--blocks", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(2)
    dev = em.Device.cpu() if args.device == "numpy" else em.Device.torch("cpu")
    em.seed(0)
    model = em.nn.Sequential(*[Block(args.width, dev.autodiff()) for _ in range(args.blocks)])
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=p.shape).astype(np.float32) for p in model.parameters()]

    def ember_step(optim: em.optim.Optimizer) -> None:
        g = em.optim.GradientsParams()
        for p, a in zip(model.parameters(), grads):
            g.register(p.id, em.Tensor.from_data(a, device=dev))
        optim.step(None, model, g)

    plain = em.optim.AdamW(lr=1e-4, weight_decay=0.1)
    grouped = em.optim.AdamW(em.optim.no_decay_groups(model, 0.1), lr=1e-4)
    tparams = [torch.tensor(a, requires_grad=True) for a in grads]
    decay_ids = grouped._groups[0].ids  # the decaying group's parameter ids
    names = list(model.parameters())
    decays = [p.id in decay_ids for p in names]
    tgroups = [
        {"params": [t for t, d in zip(tparams, decays) if d], "weight_decay": 0.1},
        {"params": [t for t, d in zip(tparams, decays) if not d], "weight_decay": 0.0},
    ]
    topt = torch.optim.AdamW(tgroups, lr=1e-4)

    def torch_step() -> None:
        for t, a in zip(tparams, grads):
            t.grad = torch.from_numpy(a)
        topt.step()

    a, b = alternating_ms(lambda: ember_step(plain), lambda: ember_step(grouped), args.repeats,
                          args.rounds)  # fmt: skip
    _, t = alternating_ms(lambda: ember_step(grouped), torch_step, args.repeats, args.rounds)
    ma, mb, mt = statistics.median(a), statistics.median(b), statistics.median(t)
    n = sum(int(np.prod(p.shape)) for p in names)
    print(f"AdamW on {args.device}, {len(names)} params ({n / 1e6:.2f}M float32), medians:")
    print(f"  ember no groups   {ma:8.3f} ms")
    print(f"  ember 2 groups    {mb:8.3f} ms   grouped / ungrouped {mb / ma:.2f}")
    print(f"  torch 2 groups    {mt:8.3f} ms   ember grouped / torch {mb / mt:.2f}")


if __name__ == "__main__":
    main()
