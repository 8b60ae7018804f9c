"""Five model training steps, ember's NumPy backend vs PyTorch eager CPU, in one process.

Workloads (float32; each step is forward, loss, backward and an Adam update):

- ``cnn``: the ``ember bench cnn`` network (``ember.models.CNN``, 32 channels) on 28x28, batch 64;
- ``resnet``: a BatchNorm ResNet (3x3 stem 16, three basic blocks 16 / 32 / 64 channels, the
  last two with stride 2 and a 1x1 projection), global average pool, fc 10; 32x32x3, batch 32;
- ``dcgan``: a DCGAN generator (z 64 -> 4x4 -> 8x8 -> 16x16 -> 32x32, transposed 4x4 convs with
  batch norm) and discriminator (strided 4x4 convs with batch norm, ReLU); one discriminator step
  on real and detached fake images, then one generator step, batch 32;
- ``lenet``: LeNet-5 (conv 1->6 5x5, max-pool, conv 6->16 5x5, max-pool, fc 120, 84, 10) on
  32x32, batch 64;
- ``gpt``: the ``ember bench gpt`` model (2 layers, width 128, 4 heads, context 64, exact GELU),
  batch 16.

Threads: ``--threads N`` gives PyTorch ``torch.set_num_threads(N)`` and ember
``EMBER_NUM_THREADS=N``: ember's kernel pool, which also sets NumPy's BLAS threads (see
``ember/backend/numpy/kernels/threads.py``). For a quiet-host run pin the process to N cores:
``taskset -c 0,1 python bench/numpy_models.py --threads 2``.

Timing: ``--rounds`` rounds; in each, ``--repeats`` steps of ember, a pause, then ``--repeats``
steps of PyTorch, each block after at least 0.1 s of warm-up steps. Printed: medians over all
timed steps and the ratio of medians ember / PyTorch, with the target of issue 20.

Usage: python bench/numpy_models.py [--threads 2] [--rounds 5] [--repeats 5]
       [--only cnn,resnet,dcgan,lenet,gpt] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

Step = Callable[[], object]
NAMES = ("cnn", "resnet", "dcgan", "lenet", "gpt")
TARGETS = {"cnn": 1.8, "resnet": 1.8, "dcgan": 1.8, "lenet": 1.5, "gpt": 2.0}
_BATCH = {"cnn": 64, "resnet": 32, "dcgan": 32, "lenet": 64, "gpt": 16}


# ------------------------------------------------------------------------------------ ember
def _ember_models(name: str, dev: Any) -> Any:
    from ember import nn

    if name == "resnet":

        class Basic(nn.Module):
            def __init__(self, cin: int, cout: int, stride: int) -> None:
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False, device=dev)
                self.b1 = nn.BatchNorm2d(cout, device=dev)
                self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False, device=dev)
                self.b2 = nn.BatchNorm2d(cout, device=dev)
                self.proj = None
                if stride != 1 or cin != cout:
                    self.proj = nn.Sequential(
                        nn.Conv2d(cin, cout, 1, stride, bias=False, device=dev),
                        nn.BatchNorm2d(cout, device=dev),
                    )

            def forward(self, x: Any) -> Any:
                from ember.nn import functional as F

                h = F.relu(self.b1(self.c1(x)))
                h = self.b2(self.c2(h))
                return F.relu(h + (x if self.proj is None else self.proj(x)))

        return nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1, bias=False, device=dev),
            nn.BatchNorm2d(16, device=dev),
            nn.ReLU(),
            Basic(16, 16, 1),
            Basic(16, 32, 2),
            Basic(32, 64, 2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10, device=dev),
        )
    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 6, 5, device=dev),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, device=dev),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120, device=dev),
            nn.ReLU(),
            nn.Linear(120, 84, device=dev),
            nn.ReLU(),
            nn.Linear(84, 10, device=dev),
        )
    if name == "dcgan":
        g = nn.Sequential(
            nn.ConvTranspose2d(64, 128, 4, 1, 0, bias=False, device=dev),
            nn.BatchNorm2d(128, device=dev),
            nn.ReLU(),
            nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False, device=dev),
            nn.BatchNorm2d(64, device=dev),
            nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False, device=dev),
            nn.BatchNorm2d(32, device=dev),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 1, 4, 2, 1, bias=False, device=dev),
            nn.Tanh(),
        )
        d = nn.Sequential(
            nn.Conv2d(1, 32, 4, 2, 1, bias=False, device=dev),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2, 1, bias=False, device=dev),
            nn.BatchNorm2d(64, device=dev),
            nn.ReLU(),
            nn.Conv2d(64, 128, 4, 2, 1, bias=False, device=dev),
            nn.BatchNorm2d(128, device=dev),
            nn.ReLU(),
            nn.Conv2d(128, 1, 4, 1, 0, bias=False, device=dev),
            nn.Flatten(),
        )
        return g, d
    raise KeyError(name)


def ember_step(name: str) -> Step:
    """One Adam step of workload ``name`` on ember's NumPy backend."""
    import numpy as np

    import ember as em
    from ember import optim
    from ember.nn import functional as F

    if name in ("cnn", "gpt"):
        from train_step import ember_step as train_step_ember

        return train_step_ember(name, em.Device.cpu())  # type: ignore[no-any-return]
    dev = em.Device.cpu().autodiff()
    plain = dev.without_autodiff()
    rng = np.random.default_rng(0)
    em.seed(0)
    n = _BATCH[name]
    if name == "dcgan":
        g, d = _ember_models(name, dev)
        opt_g, opt_d = optim.Adam(), optim.Adam()
        real = em.tensor(rng.uniform(-1, 1, (n, 1, 32, 32)).astype(np.float32), device=plain)
        z = em.tensor(rng.normal(size=(n, 64, 1, 1)).astype(np.float32), device=plain)
        ones = em.tensor(np.ones((n, 1), np.float32), device=plain)
        zeros = em.tensor(np.zeros((n, 1), np.float32), device=plain)
        nets = {"g": g, "d": d}
        bce = F.binary_cross_entropy_with_logits

        def gan_step() -> float:
            fake = nets["g"](z)
            d_loss = bce(nets["d"](real), ones) + bce(nets["d"](fake.detach()), zeros)
            gd = optim.GradientsParams.from_grads(d_loss.backward(), nets["d"])
            nets["d"] = opt_d.step(2e-4, nets["d"], gd)
            g_loss = bce(nets["d"](fake), ones)
            gg = optim.GradientsParams.from_grads(g_loss.backward(), nets["g"])
            nets["g"] = opt_g.step(2e-4, nets["g"], gg)
            return float(g_loss.item())

        return gan_step
    model = _ember_models(name, dev)
    opt = optim.Adam()
    shape = (n, 3, 32, 32) if name == "resnet" else (n, 1, 32, 32)
    x = em.tensor(rng.random(shape, dtype=np.float32), device=plain)
    y = em.tensor(rng.integers(0, 10, size=n), device=plain)
    state = {"model": model}

    def step() -> float:
        loss = F.cross_entropy(state["model"](x), y)
        grads = optim.GradientsParams.from_grads(loss.backward(), state["model"])
        state["model"] = opt.step(1e-3, state["model"], grads)
        return float(loss.item())

    return step


# ------------------------------------------------------------------------------------ torch
def _torch_models(name: str) -> Any:
    from torch import nn

    if name == "resnet":

        class Basic(nn.Module):
            def __init__(self, cin: int, cout: int, stride: int) -> None:
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                self.b1 = nn.BatchNorm2d(cout)
                self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                self.b2 = nn.BatchNorm2d(cout)
                self.proj: nn.Module | None = None
                if stride != 1 or cin != cout:
                    self.proj = nn.Sequential(
                        nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                    )

            def forward(self, x: Any) -> Any:
                h = nn.functional.relu(self.b1(self.c1(x)))
                h = self.b2(self.c2(h))
                return nn.functional.relu(h + (x if self.proj is None else self.proj(x)))

        return nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            Basic(16, 16, 1),
            Basic(16, 32, 2),
            Basic(32, 64, 2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10),
        )
    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 6, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, 10),
        )
    if name == "dcgan":
        g = nn.Sequential(
            nn.ConvTranspose2d(64, 128, 4, 1, 0, bias=False),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 1, 4, 2, 1, bias=False),
            nn.Tanh(),
        )
        d = nn.Sequential(
            nn.Conv2d(1, 32, 4, 2, 1, bias=False),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2, 1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.Conv2d(64, 128, 4, 2, 1, bias=False),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.Conv2d(128, 1, 4, 1, 0, bias=False),
            nn.Flatten(),
        )
        return g, d
    raise KeyError(name)


def torch_step(name: str) -> Step:
    """The same step in PyTorch eager on the CPU."""
    import numpy as np
    import torch
    from torch import nn

    if name in ("cnn", "gpt"):
        from train_step import torch_step as train_step_torch

        return train_step_torch(name, "cpu")  # type: ignore[no-any-return]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n = _BATCH[name]
    if name == "dcgan":
        g, d = _torch_models(name)
        opt_g = torch.optim.Adam(g.parameters(), lr=2e-4)
        opt_d = torch.optim.Adam(d.parameters(), lr=2e-4)
        real = torch.from_numpy(rng.uniform(-1, 1, (n, 1, 32, 32)).astype(np.float32))
        z = torch.from_numpy(rng.normal(size=(n, 64, 1, 1)).astype(np.float32))
        ones, zeros = torch.ones(n, 1), torch.zeros(n, 1)
        bce = nn.functional.binary_cross_entropy_with_logits

        def gan_step() -> float:
            fake = g(z)
            d_loss = bce(d(real), ones) + bce(d(fake.detach()), zeros)
            opt_d.zero_grad(set_to_none=True)
            d_loss.backward()
            opt_d.step()
            g_loss = bce(d(fake), ones)
            opt_g.zero_grad(set_to_none=True)
            g_loss.backward()
            opt_g.step()
            return float(g_loss.item())

        return gan_step
    model = _torch_models(name)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    shape = (n, 3, 32, 32) if name == "resnet" else (n, 1, 32, 32)
    x = torch.from_numpy(rng.random(shape, dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 10, size=n))

    def step() -> float:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


# ------------------------------------------------------------------------------------ timing
_WARM_S = 0.1  # warm-up per block: at least two steps and this long


def _block(fn: Step, repeats: int, out: list[float]) -> None:
    # warm-up by time, not by a step count: after the pause between blocks this VM ran ember's
    # next ~10 LeNet steps (60 ms) up to 1.3x slower, PyTorch's next one, and a spin-wait in
    # place of the pause removed it (bench/RESULTS.md, session 21); training steps run back to
    # back, so both libraries are timed once they are back at speed
    start = time.perf_counter()
    warm = 0
    while warm < 2 or time.perf_counter() - start < _WARM_S:
        fn()
        warm += 1
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(1e3 * (time.perf_counter() - t))


def measure(name: str, rounds: int, repeats: int) -> dict[str, Any]:
    """Medians (ms) of ember's and PyTorch's step of workload ``name`` and their ratio."""
    steps = (ember_step(name), torch_step(name))
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, out in zip(steps, times):
            _block(fn, repeats, out)
            time.sleep(0.2)  # let idle worker threads of the other library stop spinning
    m_em, m_th = (statistics.median(t) for t in times)
    return {
        "workload": name,
        "batch": _BATCH[name],
        "ember_ms": round(m_em, 3),
        "torch_ms": round(m_th, 3),
        "ratio": round(m_em / m_th, 3),
        "target": TARGETS[name],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5, help="timed steps per block")
    ap.add_argument("--only", default=",".join(NAMES), help="comma-separated workloads")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    names = [s for s in args.only.split(",") if s]
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {', '.join(NAMES)}")
    os.environ["EMBER_NUM_THREADS"] = str(args.threads)  # before ember loads
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for name in names:
        rows.append(measure(name, args.rounds, args.repeats))
        if not args.json:
            r = rows[-1]
            print(
                f"{r['workload']:7s} batch {r['batch']:3d}  ember {r['ember_ms']:8.2f} ms  "
                f"torch {r['torch_ms']:8.2f} ms  ratio {r['ratio']:5.2f}  "
                f"(target <= {r['target']})",
                flush=True,
            )
    if args.json:
        print(json.dumps({"threads": args.threads, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
