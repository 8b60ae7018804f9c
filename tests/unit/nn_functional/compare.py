"""Compare an ember functional op with its PyTorch counterpart: values and gradients."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

import ember as em

AD = em.Device.cpu().autodiff()
_CURRENT = [AD]


def dev() -> em.Device:
    """The autodiff device ``check`` runs on (set per backend by this package's conftest)."""
    return _CURRENT[0]


def use(device: em.Device) -> None:
    _CURRENT[0] = device


def check(
    ours: Callable[..., em.Tensor],
    ref: Callable[..., torch.Tensor],
    *arrays: np.ndarray,
    dtype: str = "float64",
    rtol: float = 1e-9,
    atol: float = 1e-11,
    grad: bool = True,
) -> None:
    """Compare forward and the gradients of sum(out * w) for every float input."""
    em_dt = em.float64 if dtype == "float64" else em.float32
    th_dt = torch.float64 if dtype == "float64" else torch.float32
    xs, ts = [], []
    for a in arrays:
        if a.dtype.kind == "f":
            x = em.tensor(a, device=dev(), dtype=em_dt)
            xs.append(x.require_grad() if grad else x)
            ts.append(torch.tensor(a, dtype=th_dt, requires_grad=grad))
        else:
            xs.append(em.tensor(a, device=dev()))
            ts.append(torch.tensor(a))
    out = ours(*xs)
    want = ref(*ts)
    assert out.shape == tuple(want.shape)
    np.testing.assert_allclose(out.to_numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return
    w = np.random.default_rng(1).normal(size=want.shape)
    grads = (out * em.tensor(w, device=dev().without_autodiff(), dtype=em_dt)).sum().backward()
    (want * torch.tensor(w, dtype=th_dt)).sum().backward()
    for x, t, a in zip(xs, ts, arrays):
        if a.dtype.kind != "f":
            continue
        g = x.grad(grads)
        expect = t.grad.numpy() if t.grad is not None else np.zeros(a.shape)
        assert g is not None
        np.testing.assert_allclose(g.to_numpy(), expect, rtol=rtol * 10, atol=atol * 10)
