"""Every registry row against PyTorch (forward values, dtypes, shapes and gradients), float64.

Driven by ``OPS`` and the references in ``refs/`` (one module per family, merged automatically):
a new row needs a reference, which ``test_every_row_has_a_reference`` enforces. Inputs come from
``helpers.sampling``; gradients are those of ``(out * w).sum()`` for fixed random weights ``w``.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from helpers.sampling import is_float, run_row, runtime_attrs, sample_cases, to_tensors

import ember as em
from ember.ops.registry import OPS, OpSpec

torch = pytest.importorskip("torch")

from .refs import REFS  # noqa: E402  (needs torch)

ROWS = [s for s in OPS.values() if not s.random]


def _tol(dtype_name: str) -> dict[str, float]:
    if dtype_name == "float64":
        return {"rtol": 1e-10, "atol": 1e-12}
    return {"rtol": 1e-5, "atol": 1e-6}


def test_every_row_has_a_reference() -> None:
    # a row drawing random numbers in its kernel has no reference: tests/cuda checks it
    missing = sorted({n for n, s in OPS.items() if not s.random} - set(REFS))
    assert not missing, (
        f"rows without a PyTorch reference: {missing}. Add them to a REFS dict in "
        "tests/differential/refs/<family>.py."
    )


def test_references_name_real_rows() -> None:
    assert sorted(set(REFS) - set(OPS)) == []


@pytest.mark.parametrize("spec", ROWS, ids=lambda s: s.name)
def test_matches_torch(spec: OpSpec, device: em.Device) -> None:
    ref = REFS.get(spec.name)
    if ref is None:
        pytest.skip(f"no reference for {spec.name!r} (test_every_row_has_a_reference fails)")
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    for arrays, attrs_in in sample_cases(spec, rng):
        attrs = runtime_attrs(spec, attrs_in, device)
        arrays = [np.array(a, dtype=np.float64) if is_float(a) else a for a in arrays]
        diff = spec.differentiable and any(is_float(a) for a in arrays)
        xs = to_tensors(arrays, device.autodiff(), require_grad=diff)
        out = run_row(spec, xs, attrs)
        tin = [torch.from_numpy(a.copy()).requires_grad_(diff and is_float(a)) for a in arrays]
        tout = ref(*tin, **attrs)
        what = f"{spec.name} on {[a.shape for a in arrays]} {attrs_in}"
        assert out.shape == tuple(tout.shape), what
        assert out.dtype.name == str(tout.dtype).removeprefix("torch."), what
        got, want = out.to_numpy(), tout.detach().numpy()
        if out.dtype.is_float:
            np.testing.assert_allclose(got, want, err_msg=what, **_tol(out.dtype.name))
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)
        if not (diff and out.dtype.is_float):
            continue
        w = rng.normal(size=out.shape)
        wt = em.Tensor.from_data(w, device=device, dtype=out.dtype)
        grads = (out * wt).sum().backward()
        (tout * torch.from_numpy(w).to(tout.dtype)).sum().backward()
        for i, (x, t) in enumerate(zip(xs, tin)):
            if not t.requires_grad:
                assert x.grad(grads) is None
                continue
            g = x.grad(grads)
            assert g is not None, what
            tg = t.grad if t.grad is not None else torch.zeros_like(t)
            np.testing.assert_allclose(
                g.to_numpy(), tg.numpy(), err_msg=f"{what}: grad {i}", **_tol(out.dtype.name)
            )
