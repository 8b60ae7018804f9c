"""Every differentiable registry row against central finite differences, in float64.

Driven by ``OPS``: a row another engineer adds is checked here automatically. For each sampled
case (``helpers.sampling``) the analytic gradients of ``loss = (out * w).sum()`` (fixed random
weights ``w``) are computed through the Tensor layer with float inputs as require-grad leaves, and
compared with central differences of the row's forward. Int/bool inputs (indices, masks) are never
perturbed. Rows marked ``smooth=False`` skip only the coordinates where the one-sided differences
disagree (a kink lies within ``eps``). The same gradients recomputed under the ``Balanced``
checkpointing strategy must be bit-for-bit equal (SEMANTICS.md §7).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from helpers.sampling import is_float, runtime_attrs, sample_cases, to_tensors

import ember as em
from ember._core.dispatch import apply
from ember.ops.registry import OPS, OpSpec, run_forward

DIFFERENTIABLE = [s for s in OPS.values() if s.differentiable and not s.random]
MAX_COORDS = 40  # finite differences per input and case (bounds the cost of large examples)
_Balanced = em.GradientCheckpointingStrategy.Balanced

# eps and tolerances by the dtype the row computes in (a cast row may narrow to float32)
_TOL = {"float64": (1e-6, 1e-5, 1e-6), "float32": (1e-3, 1e-3, 1e-3)}


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _loss(spec: OpSpec, b: Any, arrays: list[np.ndarray], attrs: dict[str, Any], w: Any) -> float:
    raws = [b.from_numpy(a, em.float64 if is_float(a) else None) for a in arrays]
    out = run_forward(b, spec, raws, attrs)
    return float(np.sum(np.asarray(b.to_numpy(out), dtype=np.float64) * w))


def numeric_grad(
    spec: OpSpec,
    b: Any,
    arrays: list[np.ndarray],
    attrs: dict[str, Any],
    w: np.ndarray,
    i: int,
    eps: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Central differences for input ``i`` at up to ``MAX_COORDS`` coordinates (a random subset of
    larger inputs); the mask is True where a difference was taken and no kink was hit."""
    x = arrays[i]
    grad = np.zeros(x.shape)
    valid = np.zeros(x.shape, dtype=bool)
    coords = list(np.ndindex(*x.shape))
    if len(coords) > MAX_COORDS:
        coords = [coords[k] for k in rng.choice(len(coords), MAX_COORDS, replace=False)]
    f0 = _loss(spec, b, arrays, attrs, w) if not spec.smooth else 0.0
    for j in coords:
        orig = x[j]
        x[j] = orig + eps
        fp = _loss(spec, b, arrays, attrs, w)
        x[j] = orig - eps
        fm = _loss(spec, b, arrays, attrs, w)
        x[j] = orig
        grad[j] = (fp - fm) / (2 * eps)
        valid[j] = True
        if not spec.smooth:
            right, left = (fp - f0) / eps, (f0 - fm) / eps
            valid[j] = abs(right - left) <= 1e-3 * (1.0 + abs(right))
    return grad, valid


def analytic_grads(
    spec: OpSpec,
    arrays: list[np.ndarray],
    attrs: dict[str, Any],
    device: em.Device,
    w: np.ndarray,
) -> tuple[em.Tensor, list[np.ndarray | None]]:
    xs = to_tensors(arrays, device, require_grad=True)
    out = apply(spec, xs if spec.arity == -1 else tuple(xs), attrs)
    if not out.dtype.is_float:
        return out, []
    assert out.is_tracked(), f"{spec.name}: a float result of require-grad inputs is tracked"
    wt = em.Tensor.from_data(w, device=device.without_autodiff(), dtype=out.dtype)
    grads = (out * wt).sum().backward()
    result: list[np.ndarray | None] = []
    for x, a in zip(xs, arrays):
        g = x.grad(grads)
        if not is_float(a):
            assert g is None
            result.append(None)
            continue
        assert g is not None, f"{spec.name}: a float input got no gradient"
        assert not g.is_autodiff()
        assert g.shape == a.shape and g.dtype is em.float64
        result.append(g.to_numpy())
    return out, result


@pytest.mark.parametrize("spec", DIFFERENTIABLE, ids=lambda s: s.name)
def test_matches_finite_differences(spec: OpSpec, device: em.Device) -> None:
    rng = np.random.default_rng(_seed(spec.name))
    b = device.b
    checked = 0
    for arrays_in, attrs_in in sample_cases(spec, rng):
        attrs = runtime_attrs(spec, attrs_in, device)
        arrays = [np.array(a, dtype=np.float64) if is_float(a) else a for a in arrays_in]
        probe = apply(
            spec, to_tensors(arrays, device, require_grad=False), attrs
        )  # output shape/dtype
        if not probe.dtype.is_float or not any(is_float(a) for a in arrays):
            continue  # e.g. a cast to or from int: no gradient flows
        w = rng.normal(size=probe.shape)
        out, analytic = analytic_grads(spec, arrays, attrs, device.autodiff(), w)
        _, balanced = analytic_grads(
            spec, arrays, attrs, device.autodiff().gradient_checkpointing(), w
        )
        eps, rtol, atol = _TOL[out.dtype.name]
        for i, a in enumerate(arrays):
            if not is_float(a):
                continue
            g = analytic[i]
            assert g is not None
            np.testing.assert_array_equal(balanced[i], g, err_msg=f"{spec.name}: Balanced grad")
            num, valid = numeric_grad(spec, b, arrays, attrs, w, i, eps, rng)
            np.testing.assert_allclose(
                g[valid],
                num[valid],
                rtol=rtol,
                atol=atol,
                err_msg=f"{spec.name}: input {i} of case {[x.shape for x in arrays]} {attrs_in}",
            )
            checked += int(valid.sum())
    assert checked > 0, f"{spec.name}: no case exercised a gradient"
