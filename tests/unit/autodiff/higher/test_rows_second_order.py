"""Every differentiable registry row, differentiated twice (``backward(create_graph=True)``).

Driven by ``OPS`` and ``helpers.sampling``, like the first-order suites: for each case, with
``loss = (out * w).sum()`` and first gradients ``g_i = x_i.grad(loss.backward(create_graph=True))``,
the gradient of ``s = sum_i (g_i * v_i).sum()`` (fixed random ``w``, ``v``) is checked

- against central differences of ``s`` along a random direction, ``s`` evaluated with the
  first-order engine (so the recorded backward equals the derivative of the row's own rule);
- against ``torch.autograd.grad(..., create_graph=True)`` on the row's PyTorch reference;
- under ``Balanced``: bit for bit equal to ``Disabled``.

Rows whose backward is a fused kernel with no row yet are listed in ``NOT_TWICE`` with the
reason; for them the test asserts the ``AutodiffError`` naming the row.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from helpers.sampling import is_float, runtime_attrs, sample_cases, to_tensors

import ember as em
from ember._core.dispatch import apply
from ember.ops.registry import OPS, OpSpec

torch = pytest.importorskip("torch")

from differential.refs import REFS  # noqa: E402  (needs torch)

DIFFERENTIABLE = [s for s in OPS.values() if s.differentiable and not s.random]
_Balanced = em.GradientCheckpointingStrategy.Balanced

# rows whose rule calls a fused backend kernel that has no differentiable form (none today; a
# row listed here must raise an AutodiffError naming it under create_graph=True)
NOT_TWICE: dict[str, str] = {}
EPS = 1e-5  # central differences of a float64 first gradient: truncation ~1e-10, rounding ~1e-11


def _run(spec: OpSpec, xs: list[em.Tensor], attrs: dict[str, Any]) -> em.Tensor:
    return apply(spec, xs if spec.arity == -1 else tuple(xs), attrs)


def _first(
    spec: OpSpec,
    arrays: list[np.ndarray],
    attrs: dict[str, Any],
    device: em.Device,
    w: np.ndarray,
    create_graph: bool,
) -> tuple[list[em.Tensor], list[em.Tensor | None]]:
    xs = to_tensors(arrays, device, require_grad=True)
    out = _run(spec, xs, attrs)
    wt = em.Tensor.from_data(w, device=device.without_autodiff(), dtype=out.dtype)
    grads = (out * wt).sum().backward(create_graph=create_graph)
    return xs, [x.grad(grads) if is_float(a) else None for x, a in zip(xs, arrays)]


def _s_plain(
    spec: OpSpec, arrays: list[np.ndarray], attrs: Any, device: em.Device, w: Any, v: Any
) -> float:
    _, gs = _first(spec, arrays, attrs, device, w, create_graph=False)
    return float(sum(np.sum(g.to_numpy() * vi) for g, vi in zip(gs, v) if g is not None))


def _second(
    spec: OpSpec, arrays: list[np.ndarray], attrs: Any, device: em.Device, w: Any, v: Any
) -> list[np.ndarray]:
    xs, gs = _first(spec, arrays, attrs, device, w, create_graph=True)
    s = None
    for g, vi in zip(gs, v):
        if g is None:
            continue
        term = (g * em.Tensor.from_data(vi, device=device.without_autodiff(), dtype=g.dtype)).sum()
        s = term if s is None else s + term
    hs: list[np.ndarray] = [np.zeros(a.shape) for a in arrays]
    if s is not None and s.is_tracked():
        h = s.backward()
        for i, (x, a) in enumerate(zip(xs, arrays)):
            if is_float(a):
                hx = x.grad(h)
                if hx is not None:
                    assert not hx.is_autodiff()
                    hs[i] = hx.to_numpy()
    return hs


def _torch_second(
    spec: OpSpec, arrays: list[np.ndarray], attrs: dict[str, Any], w: Any, v: Any
) -> list[np.ndarray]:
    tin = [torch.from_numpy(a.copy()).requires_grad_(is_float(a)) for a in arrays]
    tout = REFS[spec.name](*tin, **attrs)
    loss = (tout * torch.from_numpy(w).to(tout.dtype)).sum()
    leaves = [t for t in tin if t.requires_grad]
    gs = torch.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
    s = sum(
        (g * torch.from_numpy(vi).to(g.dtype)).sum()
        for g, vi in zip(gs, [vi for vi, a in zip(v, arrays) if is_float(a)])
        if g is not None
    )
    hs = [np.zeros(a.shape) for a in arrays]
    if isinstance(s, torch.Tensor) and s.requires_grad:
        got = torch.autograd.grad(s, leaves, allow_unused=True)
        k = 0
        for i, a in enumerate(arrays):
            if is_float(a):
                if got[k] is not None:
                    hs[i] = got[k].detach().numpy(force=True)
                k += 1
    return hs


def _moved(arrays: list[np.ndarray], u: list[Any], step: float) -> list[np.ndarray]:
    return [a + step * ui if ui is not None else a for a, ui in zip(arrays, u)]


@pytest.mark.parametrize("spec", DIFFERENTIABLE, ids=lambda s: s.name)
def test_second_order(spec: OpSpec, device: em.Device) -> None:
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()) + 2)
    checked = 0
    for arrays_in, attrs_in in sample_cases(spec, rng):
        attrs = runtime_attrs(spec, attrs_in, device)
        arrays = [np.array(a, dtype=np.float64) if is_float(a) else a for a in arrays_in]
        probe = _run(spec, to_tensors(arrays, device, require_grad=False), attrs)
        if not probe.dtype.is_float or not any(is_float(a) for a in arrays):
            continue
        w = rng.normal(size=probe.shape)
        v = [rng.normal(size=a.shape) for a in arrays]
        ad = device.autodiff()
        what = f"{spec.name} on {[a.shape for a in arrays]} {attrs_in}"
        if spec.name in NOT_TWICE:
            with pytest.raises(em.AutodiffError, match=f"op '{spec.name}'"):
                _second(spec, arrays, attrs, ad, w, v)
            checked += 1
            continue
        hs = _second(spec, arrays, attrs, ad, w, v)
        balanced = _second(spec, arrays, attrs, ad.gradient_checkpointing(), w, v)
        for h, hb in zip(hs, balanced):
            np.testing.assert_array_equal(hb, h, err_msg=f"{what}: Balanced")
        f64 = probe.dtype is em.float64
        if spec.name in REFS:  # (the differential suite requires every row to have one)
            ref = _torch_second(spec, arrays, attrs, w, v)
            tol = {"rtol": 1e-9, "atol": 1e-11} if f64 else {"rtol": 1e-4, "atol": 1e-5}
            for i, (h, r) in enumerate(zip(hs, ref)):
                np.testing.assert_allclose(h, r, err_msg=f"{what}: input {i} vs torch", **tol)
        if f64:
            u = [rng.normal(size=a.shape) if is_float(a) else None for a in arrays]

            sp = _s_plain(spec, _moved(arrays, u, EPS), attrs, ad, w, v)
            sm = _s_plain(spec, _moved(arrays, u, -EPS), attrs, ad, w, v)
            fd = (sp - sm) / (2 * EPS)
            an = float(sum(np.sum(h * ui) for h, ui in zip(hs, u) if ui is not None))
            assert abs(an - fd) <= 1e-5 * (1.0 + abs(fd)), f"{what}: {an} vs differences {fd}"
        checked += 1
    assert checked > 0, f"{spec.name}: no case exercised a second derivative"


def test_not_twice_names_real_rows() -> None:
    assert sorted(set(NOT_TWICE) - {s.name for s in DIFFERENTIABLE}) == []
