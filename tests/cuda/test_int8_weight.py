"""The weight-only int8 GEMM of the torch backend (CUDA, bf16/fp16 inputs, Triton)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("m", [1, 7, 300])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_kernel_against_float64(m: int, dtype: str) -> None:
    from ember.backend.torch.kernels import int8_weight

    k, n = 1000, 520
    g = torch.Generator(device="cuda").manual_seed(0)
    dt = getattr(torch, dtype)
    x = torch.randn((m, k), device="cuda", generator=g).to(dt)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda", generator=g).t()
    s = torch.rand((1, n), device="cuda", generator=g) * 0.01 + 1e-3
    assert int8_weight.available(x, w)
    got = em.Device.cuda(0).b.int8_weight_linear(x, w.t(), s.t())
    want = (x.double() @ w.double()) * s.double()
    assert got.dtype == dt and got.shape == (m, n)
    # float32 accumulation, one rounding to the half type at the end
    eps = torch.finfo(dt).eps
    err = (got.double() - want).abs() / (want.abs() + (x.double().abs() @ w.double().abs()) * 1e-3)
    assert float(err.max()) <= 2 * eps, float(err.max())


def test_linear_with_an_int8_weight_uses_it_and_keeps_gradients() -> None:
    dev = em.Device.cuda(0).autodiff()
    rng = np.random.default_rng(0)
    w = em.tensor(rng.normal(size=(64, 96)).astype(np.float32), device=dev)
    qw = w.quantize(em.QuantScheme(granularity=("channel", 0)))
    x = em.tensor(rng.normal(size=(5, 96)).astype(np.float32), device=dev).cast(em.bfloat16)
    x = x.require_grad()
    y = em.nn.functional.linear(x, qw)
    ref = x.cast(em.float32) @ qw.dequantize().T
    np.testing.assert_allclose(y.cast(em.float32).to_numpy(), ref.to_numpy(), rtol=2e-2, atol=2e-2)
    g = (y.cast(em.float32) * 1.0).sum().backward()
    dq = qw.dequantize().to_numpy()
    want = dq.sum(0)  # d(sum y)/dx = column sums of W
    # bfloat16: the scales are rounded (2**-8 relative) before the product, the sum once after
    bound = 2.0**-8 * np.abs(dq).sum(0) + 2.0**-8 * np.abs(want) + 1e-6
    err = np.abs(x.grad(g).cast(em.float32).to_numpy() - want)
    assert (err <= bound).all(), float((err / bound).max())
