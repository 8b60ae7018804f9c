"""Shared checks for the op tests: forward and gradients of a Tensor-level function against
PyTorch (values and autograd) and against central finite differences, in float64."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

import ember as em

EmFn = Callable[..., em.Tensor]
TorchFn = Callable[..., torch.Tensor]


def em_inputs(arrays: Sequence[np.ndarray], device: em.Device, grad: bool) -> list[em.Tensor]:
    """float arrays -> float64 tensors (require-grad leaves if ``grad``); int/bool kept."""
    out = []
    for a in arrays:
        if a.dtype.kind == "f":
            t = em.Tensor.from_data(
                a, device=device.autodiff() if grad else device, dtype="float64"
            )
            out.append(t.require_grad() if grad else t)
        else:
            out.append(em.Tensor.from_data(a, device=device))
    return out


def torch_inputs(arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
    out = []
    for a in arrays:
        t = torch.from_numpy(np.ascontiguousarray(a))
        out.append(t.double().requires_grad_(True) if a.dtype.kind == "f" else t)
    return out


def check_forward(
    f_em: EmFn, f_torch: TorchFn, arrays: Sequence[np.ndarray], device: em.Device
) -> Any:
    """Same values and shape as PyTorch (int results compare exactly)."""
    got = f_em(*em_inputs(arrays, device, grad=False))
    want = f_torch(*[t.detach() for t in torch_inputs(arrays)])
    assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
    w = want.detach().numpy()
    if w.dtype.kind == "f":
        assert got.dtype.is_float
        np.testing.assert_allclose(got.to_numpy(), w, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got.to_numpy(), w)
    return got


def _loss_value(
    f_em: EmFn, arrays: Sequence[np.ndarray], device: em.Device, w: np.ndarray
) -> float:
    out = f_em(*em_inputs(arrays, device, grad=False))
    return float(np.sum(out.to_numpy() * w))


def check_grads(
    f_em: EmFn,
    f_torch: TorchFn,
    arrays: Sequence[np.ndarray],
    device: em.Device,
    *,
    finite_differences: bool = True,
    seed: int = 0,
) -> list[np.ndarray | None]:
    """Gradients of ``sum(f(x) * w)`` (random fixed ``w``) equal torch autograd's and, where
    asked, central finite differences. Returns ember's gradients (None for int inputs)."""
    arrays = [np.array(a, dtype=np.float64) if a.dtype.kind == "f" else a for a in arrays]
    xs = em_inputs(arrays, device, grad=True)
    out = f_em(*xs)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=out.shape)
    grads = (out * em.Tensor.from_data(w, device=device, dtype="float64")).sum().backward()
    ts = torch_inputs(arrays)
    t_out = f_torch(*ts)
    (t_out * torch.from_numpy(w)).sum().backward()
    result: list[np.ndarray | None] = []
    for i, (x, t, a) in enumerate(zip(xs, ts, arrays)):
        if a.dtype.kind != "f":
            result.append(None)
            continue
        g = x.grad(grads)
        got = np.zeros(a.shape) if g is None else g.to_numpy()
        want = np.zeros(a.shape) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"input {i} vs torch")
        if finite_differences:
            num = np.zeros(a.shape)
            for j in np.ndindex(*a.shape):
                orig = a[j]
                a[j] = orig + 1e-6
                fp = _loss_value(f_em, arrays, device, w)
                a[j] = orig - 1e-6
                fm = _loss_value(f_em, arrays, device, w)
                a[j] = orig
                num[j] = (fp - fm) / 2e-6
            np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-6, err_msg=f"input {i} vs fd")
        result.append(got)
    return result
