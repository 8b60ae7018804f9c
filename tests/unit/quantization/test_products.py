"""Products with quantized operands: the int8 kernel (int32 sums), x @ q, F.linear and
F.embedding against the same products with the dequantized tensors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

S = em.QuantScheme
F = em.nn.functional


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _f64(t: Any) -> np.ndarray:
    return np.asarray(t.dequantize().to_numpy() if t.is_quantized() else t.to_numpy(), np.float64)


@pytest.mark.parametrize("k", [5, 1100])  # K * 128 * 127 below and above 2**24 (NumPy's path)
def test_int8_matmul_is_exact(device: em.Device, k: int) -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (7, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, 9)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64)
    bk = device.b
    out = bk.int8_matmul(bk.from_numpy(a), bk.from_numpy(b))
    assert bk.dtype_of(out) is em.int32
    np.testing.assert_array_equal(bk.to_numpy(out), want)
    default = type(bk).__mro__[1].int8_matmul(bk, bk.from_numpy(a), bk.from_numpy(b))
    np.testing.assert_array_equal(bk.to_numpy(default), want)


def test_cuda_int_mm_padding() -> None:
    pytest.importorskip("torch")
    from ember.backend.torch.backend import _int_mm_padding

    assert _int_mm_padding(4096, 4096, 4096) == (0, 0, 0)
    assert _int_mm_padding(1, 4096, 4096) == (16, 0, 0)
    assert _int_mm_padding(17, 12, 3) == (0, 4, 5)


def test_cuda_int_mm_gets_a_column_major_right_operand() -> None:
    torch = pytest.importorskip("torch")
    from ember.backend.torch.backend import _column_major

    b = torch.arange(24, dtype=torch.int8).reshape(4, 6)
    c = _column_major(b)
    assert c.stride() == (1, 4) and torch.equal(c, b) and _column_major(c) is c


PAIRS: list[tuple[Any, Any]] = [
    ("tensor", "tensor"),
    (("channel", 0), ("channel", 1)),  # the int8 kernel: per row x per column
    (("channel", 1), ("channel", 0)),  # scales along K: dequantized
    (("block", 4), "tensor"),
]


@pytest.mark.parametrize("ga, gb", PAIRS, ids=str)
def test_quantized_products(device: em.Device, ga: Any, gb: Any) -> None:
    a = em.tensor(_rand((5, 16), 0), device=device)
    w = em.tensor(_rand((16, 8), 1), device=device)
    qa, qb = a.quantize(S(granularity=ga)), w.quantize(S(granularity=gb))
    tol = dict(rtol=1e-5, atol=1e-5)
    for lhs, rhs in [(qa, qb), (a, qb), (qa, w)]:
        out = lhs @ rhs
        assert type(out) is em.Tensor and out.dtype is em.float32 and out.shape == (5, 8)
        np.testing.assert_allclose(out.to_numpy(), _f64(lhs) @ _f64(rhs), **tol)
    np.testing.assert_allclose(qa.matmul(qb).to_numpy(), (qa @ qb).to_numpy())


def test_batched_and_affine_products(device: em.Device) -> None:
    x = em.tensor(_rand((2, 3, 16), 2), device=device)
    q = em.tensor(_rand((16, 4), 3), device=device).quantize(S(mode="affine"))
    np.testing.assert_allclose((x @ q).to_numpy(), _f64(x) @ _f64(q), rtol=1e-5, atol=1e-5)
    v = em.tensor(_rand((16,), 4), device=device)
    np.testing.assert_allclose((v @ q).to_numpy(), _f64(v) @ _f64(q), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("g", [("channel", 0), ("block", 8), "tensor"], ids=str)
def test_linear_with_a_quantized_weight(device: em.Device, g: Any) -> None:
    x = em.tensor(_rand((2, 3, 16), 5), device=device)
    w = em.tensor(_rand((7, 16), 6), device=device).quantize(S(granularity=g))
    bias = em.tensor(_rand((7,), 7), device=device)
    out = F.linear(x, w, bias)
    want = _f64(x) @ _f64(w).T + _f64(bias)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(F.linear(x, w).to_numpy(), want - _f64(bias), rtol=1e-5, atol=1e-5)
    qx = x[0].quantize(S(granularity=("channel", 0)))  # quantized activations: int8 x int8
    want = _f64(qx) @ _f64(w).T + _f64(bias)
    np.testing.assert_allclose(F.linear(qx, w, bias).to_numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(em.ShapeError, match="linear: expected weight"):
        F.linear(x, w.T)
    with pytest.raises(em.ShapeError, match="linear: expected bias of shape"):
        F.linear(x, w, bias[:3])


def test_embedding_with_a_quantized_weight(device: em.Device) -> None:
    w = em.tensor(_rand((10, 8), 8), device=device)
    idx = em.tensor([[1, 9], [0, 1]], device=device)
    for g in [("channel", 0), ("channel", 1), ("block", 4)]:
        q = w.quantize(S(mode="affine", granularity=g))
        out = F.embedding(idx, q)
        assert out.shape == (2, 2, 8)
        np.testing.assert_array_equal(out.to_numpy(), q.dequantize().to_numpy()[idx.to_numpy()])
    with pytest.raises(em.DTypeError, match="embedding: expected int indices"):
        F.embedding(em.tensor([0.0], device=device), q)


def test_product_errors() -> None:
    q = em.Tensor.ones((3, 4)).quantize(S())
    with pytest.raises(em.ShapeError, match="inner sizes differ"):
        q @ q
    with pytest.raises(em.DTypeError, match="expected a Tensor operand"):
        q @ np.ones((4, 2))
    with pytest.raises(em.DeviceError):
        pytest.importorskip("torch")
        em.Tensor.ones((2, 3), device=em.Device.torch("cpu")) @ q
