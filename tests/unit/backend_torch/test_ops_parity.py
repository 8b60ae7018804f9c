"""Every registry row gives the same values, dtypes and gradients on torch CPU as on NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember._core.dispatch import apply
from ember.ops.registry import OPS, OpSpec

torch = pytest.importorskip("torch")

Sample = tuple[tuple[np.ndarray, ...], dict[str, Any]]
_SKIP_ROWS = {"to_device"}  # device moves: test_storage.py


def _sampled(spec: OpSpec, rng: np.random.Generator) -> list[Sample]:
    """Inputs for rows without ``examples``: float64 arrays in the row's domain plus its attrs."""
    lo, hi = spec.domain or (-2.0, 2.0)

    def x(shape: tuple[int, ...] = (3, 4)) -> np.ndarray:
        return rng.uniform(lo, hi, size=shape)

    mask = rng.random((3, 4)) < 0.5
    name = spec.name
    if name.endswith("_elem"):
        return [((x(),), {"value": 0.25})]
    if name == "powi_scalar":
        return [((x(),), {"value": 3}), ((x(),), {"value": 2})]
    if name.endswith("_scalar"):
        return [((x(),), {"value": 1.5})]
    if name == "clamp":
        return [((x(),), {"min": -0.5, "max": 0.75}), ((x(),), {"min": None, "max": 0.5})]
    if name == "mask_where":
        return [((x(), mask, x()), {})]
    if name == "mask_fill":
        return [((x(), mask), {"value": 0.5})]
    if name == "cast":
        return [((x(),), {"dtype": em.float32, "src": em.float64})]
    if name.startswith("logical_"):
        return [(tuple(rng.random((3, 4)) < 0.5 for _ in range(spec.arity)), {})]
    if spec.arity == 2:
        return [((x(), x()), {}), ((x((2, 3, 4)), x((4,))), {})]
    return [(tuple(x() for _ in range(spec.arity)), {})]


def _samples(spec: OpSpec) -> list[Sample]:
    rng = np.random.default_rng(0)
    if spec.examples is not None:
        return list(spec.examples(rng))
    return _sampled(spec, rng)


def _run(spec: OpSpec, arrays: tuple[np.ndarray, ...], attrs: dict[str, Any], dev: em.Device):
    """Forward on ``dev`` (autodiff), then backward from the sum of the output if tracked."""
    ad = dev.autodiff()
    xs = []
    for a in arrays:
        t = em.Tensor.from_data(np.asarray(a), device=ad)
        if t.dtype.is_float and spec.differentiable:
            t = t.require_grad()
        xs.append(t)
    out = apply(spec, xs if spec.arity == -1 else tuple(xs), dict(attrs))
    grads: list[np.ndarray | None] = []
    if out.is_tracked():
        g = out.backward()
        grads = [None if t.grad(g) is None else t.grad(g).to_numpy() for t in xs]
    return out, grads


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
PLACES = ["cpu", pytest.param("cuda:0", marks=[pytest.mark.cuda, _CUDA])]


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize(
    "spec", [s for s in OPS.values() if s.name not in _SKIP_ROWS and not s.random], ids=str
)
def test_row_matches_numpy(spec: OpSpec, where: str) -> None:
    np_dev, t_dev = em.Device.cpu(), em.Device.torch(where)
    for arrays, attrs in _samples(spec):
        out_np, g_np = _run(spec, arrays, attrs, np_dev)
        out_t, g_t = _run(spec, arrays, attrs, t_dev)
        assert out_t.dtype is out_np.dtype, (spec.name, out_t.dtype, out_np.dtype)
        assert out_t.shape == out_np.shape, spec.name
        np.testing.assert_allclose(out_t.to_numpy(), out_np.to_numpy(), rtol=1e-10, atol=1e-12)
        assert len(g_t) == len(g_np)
        for a, b in zip(g_t, g_np):
            assert (a is None) == (b is None), spec.name
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=spec.name)


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16, em.float32, em.int32, em.int64])
def test_python_scalars_never_upcast(dtype: em.DType) -> None:
    np_x = em.Tensor.ones((2, 3), dtype=dtype)
    t_x = em.Tensor.ones((2, 3), dtype=dtype, device=em.Device.torch("cpu"))
    for f in (lambda t: t * 2, lambda t: t + 3, lambda t: t - 1, lambda t: 2 - t, lambda t: -t):
        assert f(t_x).dtype is f(np_x).dtype is dtype
    if dtype.is_float:
        # a Python float keeps every float dtype (API.md); checked on torch alone because
        # ml_dtypes' bfloat16 arrays lift to float32 with Python floats under NumPy
        for f in (lambda t: t * 0.5, lambda t: t / 3.0, lambda t: 1.0 / t, lambda t: t.exp()):
            assert f(t_x).dtype is dtype
    assert t_x.sum().dtype is np_x.sum().dtype
    assert t_x.sum().shape == np_x.sum().shape == ()


def test_mixed_dtype_promotion_matches_numpy() -> None:
    pairs = [(em.float16, em.bfloat16), (em.int32, em.float16), (em.bool, em.int32)]
    for a, b in pairs:
        for dev in (em.Device.cpu(), em.Device.torch("cpu")):
            x = em.Tensor.ones((2,), dtype=a, device=dev)
            y = em.Tensor.ones((2,), dtype=b, device=dev)
            assert (x + y).dtype is em.dtype.promote(a, b)
