"""A float input times a quantized weight (the ``int8_weight_matmul`` row) in half precision:
the output and the input's gradient keep the input's dtype (the float32 scales are cast)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

pytest.importorskip("torch")


def test_bfloat16_input_times_an_int8_weight() -> None:
    dev = em.Device.torch("cpu").autodiff()
    rng = np.random.default_rng(0)
    w = em.tensor(rng.normal(size=(8, 12)).astype(np.float32), device=dev)
    qw = w.quantize(em.QuantScheme(granularity=("channel", 0)))
    x = em.tensor(rng.normal(size=(3, 12)).astype(np.float32), device=dev).cast(em.bfloat16)
    x = x.require_grad()
    y = em.nn.functional.linear(x, qw)
    assert y.dtype is em.bfloat16
    want = x.cast(em.float32).to_numpy() @ qw.dequantize().to_numpy().T
    np.testing.assert_allclose(y.cast(em.float32).to_numpy(), want, rtol=2e-2, atol=3e-2)
    g = x.grad(y.cast(em.float32).sum().backward())
    assert g.dtype is em.bfloat16
    col_sums = qw.dequantize().sum_dim(0).to_numpy()  # d(sum y)/dx: the weight's column sums
    np.testing.assert_allclose(
        g.cast(em.float32).to_numpy(), np.broadcast_to(col_sums, (3, 12)), rtol=2e-2, atol=3e-2
    )
