"""Higher-order gradients (issue 17): ember against PyTorch eager on the same workloads.

    python bench/higher_order.py [--backend torch|numpy] [--threads N] [--repeats R]
                                 [--rounds K] [--small]

Two workloads, float32, timed in alternating blocks with PyTorch eager in the same run
(``_timing.alternating_ms``); the figure is the ratio of the medians (ember / PyTorch; the
target on torch CPU is <= 1.3):

- ``wgan_gp``: one WGAN-GP critic step of an MLP critic: the critic on real, fake and
  interpolated inputs, the input gradient with ``create_graph=True``, the gradient penalty, and
  the backward of the whole loss to the critic's parameters.
- ``mlp_hvp``: a Hessian-vector product of an MLP's cross-entropy loss with respect to its
  parameters (``em.autodiff.hvp``; PyTorch: ``autograd.grad(create_graph=True)`` then a second
  ``autograd.grad``, the double-backward it is built from).

``--backend numpy`` runs ember on its NumPy backend against the same PyTorch reference.
``--small`` shrinks the shapes to check that the script runs.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

from _timing import alternating_ms, pin_threads


def _shapes(small: bool) -> dict[str, int]:
    if small:
        return {"batch": 8, "features": 16, "hidden": 32, "classes": 4}
    return {"batch": 256, "features": 128, "hidden": 512, "classes": 10}


def _weights(rng: Any, sizes: list[tuple[int, ...]]) -> list[Any]:
    import numpy as np

    return [(rng.normal(size=s) * 0.1).astype(np.float32) for s in sizes]


def wgan_gp(
    backend: str, dims: dict[str, int]
) -> tuple[Callable[[], object], Callable[[], object]]:
    """(ember step, torch step) of one WGAN-GP critic update's gradient computation."""
    import numpy as np
    import torch

    import ember as em
    import ember.nn.functional as F

    rng = np.random.default_rng(0)
    b, f, h = dims["batch"], dims["features"], dims["hidden"]
    params = _weights(rng, [(h, f), (h,), (h, h), (h,), (1, h), (1,)])
    real = rng.normal(size=(b, f)).astype(np.float32)
    fake = (rng.normal(size=(b, f)) + 1).astype(np.float32)
    mix = rng.uniform(size=(b, 1)).astype(np.float32)
    lam = 10.0

    dev = em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")
    ad = dev.autodiff()
    p = [em.Tensor.from_data(a, device=ad).require_grad() for a in params]
    ereal, efake = em.Tensor.from_data(real, device=dev), em.Tensor.from_data(fake, device=dev)
    emix = em.Tensor.from_data(mix, device=dev)

    def critic(q: list[Any], x: Any, lin: Any, act: Any) -> Any:
        return lin(act(lin(act(lin(x, q[0], q[1])), q[2], q[3])), q[4], q[5])

    def ember_step() -> object:
        x_hat = (emix * ereal + (1 - emix) * efake).autodiff().require_grad()
        (g,) = em.autodiff.grad(critic(p, x_hat, F.linear, F.silu).sum(), x_hat, create_graph=True)
        norm = ((g * g).sum_dim(1) + 1e-12).sqrt() - 1.0
        penalty = (norm * norm).mean()
        loss = critic(p, efake, F.linear, F.silu).mean() - critic(p, ereal, F.linear, F.silu).mean()
        grads = (loss + penalty * lam).backward()
        return [w.grad(grads) for w in p]

    tp = [torch.from_numpy(a.copy()).requires_grad_(True) for a in params]
    treal, tfake, tmix = (torch.from_numpy(a) for a in (real, fake, mix))
    TF = torch.nn.functional

    def torch_step() -> object:
        x_hat = (tmix * treal + (1 - tmix) * tfake).requires_grad_(True)
        (g,) = torch.autograd.grad(
            critic(tp, x_hat, TF.linear, TF.silu).sum(), x_hat, create_graph=True
        )
        norm = ((g * g).sum(1, keepdim=True) + 1e-12).sqrt() - 1.0
        penalty = (norm * norm).mean()
        loss = (
            critic(tp, tfake, TF.linear, TF.silu).mean()
            - critic(tp, treal, TF.linear, TF.silu).mean()
        )
        return torch.autograd.grad(loss + penalty * lam, tp)

    return ember_step, torch_step


def mlp_hvp(
    backend: str, dims: dict[str, int]
) -> tuple[Callable[[], object], Callable[[], object]]:
    """(ember HVP, torch HVP) of an MLP cross-entropy loss with respect to its parameters."""
    import numpy as np
    import torch

    import ember as em
    import ember.nn.functional as F

    rng = np.random.default_rng(1)
    b, f, h, c = dims["batch"], dims["features"], dims["hidden"], dims["classes"]
    sizes = [(h, f), (h,), (c, h), (c,)]
    params, vs = _weights(rng, sizes), _weights(rng, sizes)
    x = rng.normal(size=(b, f)).astype(np.float32)
    y = rng.integers(0, c, size=(b,))

    dev = em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")
    ep = [em.Tensor.from_data(a, device=dev) for a in params]
    ev = [em.Tensor.from_data(a, device=dev) for a in vs]
    ex, ey = em.Tensor.from_data(x, device=dev), em.Tensor.from_data(y, device=dev)

    def loss(w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        return F.cross_entropy(F.linear(F.tanh(F.linear(ex, w1, b1)), w2, b2), ey)

    def ember_hvp() -> object:
        return em.autodiff.hvp(loss, ep, ev)[1]

    tp = [torch.from_numpy(a.copy()).requires_grad_(True) for a in params]
    tv = [torch.from_numpy(a) for a in vs]
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    TF = torch.nn.functional

    def torch_hvp() -> object:
        w1, b1, w2, b2 = tp
        out = TF.cross_entropy(TF.linear(torch.tanh(TF.linear(tx, w1, b1)), w2, b2), ty)
        gs = torch.autograd.grad(out, tp, create_graph=True)
        dot = sum((g * v).sum() for g, v in zip(gs, tv))
        return torch.autograd.grad(dot, tp)

    return ember_hvp, torch_hvp


WORKLOADS = {"wgan_gp": wgan_gp, "mlp_hvp": mlp_hvp}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("torch", "numpy"), default="torch")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    pin_threads(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    dims = _shapes(args.small)
    print(f"backend={args.backend} threads={args.threads} shapes={dims}")
    print(f"{'workload':<10} {'ember ms':>10} {'torch ms':>10} {'ratio':>7}")
    for name, make in WORKLOADS.items():
        ember_fn, torch_fn = make(args.backend, dims)
        te, tt = alternating_ms(ember_fn, torch_fn, args.repeats, args.rounds)
        me, mt = statistics.median(te), statistics.median(tt)
        print(f"{name:<10} {me:>10.3f} {mt:>10.3f} {me / mt:>7.2f}")


if __name__ == "__main__":
    main()
