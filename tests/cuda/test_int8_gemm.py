"""The Triton int8 GEMM of the torch backend (CUDA, products of at least 1024 per side)."""

from __future__ import annotations

import pytest

import ember as em

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1100, 1048, 1032)])
@pytest.mark.parametrize("column_major", [True, False])
def test_exact_against_int_mm(shape: tuple[int, int, int], column_major: bool) -> None:
    from ember.backend.torch.kernels import int8_gemm

    m, k, n = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda", generator=g)
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda", generator=g)
    if column_major:
        b = b.t().contiguous().t()
    assert int8_gemm.available(a, b)
    want = a.double() @ b.double()  # exact: |sums| < 2**53
    got = em.Device.cuda(0).b.int8_matmul(a, b)
    assert got.dtype == torch.int32
    assert torch.equal(got.double(), want)


@pytest.mark.parametrize("per", ["row", "tensor"])
def test_scaled_epilogue_equals_scaling_after(per: str) -> None:
    # the epilogue computes acc * (sa[m] * sb[n]) in float32: the same operations, bit for bit,
    # as scaling the exact int32 result afterwards
    m, k, n = 1100, 1048, 1032
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda", generator=g)
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda", generator=g).t()
    rows, cols = (m, n) if per == "row" else (1, 1)
    sa = torch.rand((rows, 1), device="cuda", generator=g) * 0.02 + 1e-3
    sb = torch.rand((1, cols), device="cuda", generator=g) * 0.02 + 1e-3
    b_ = em.Device.cuda(0).b
    got = b_.int8_matmul_scaled(a, b, sa, sb)
    want = b_.int8_matmul(a, b).float() * (sa * sb)
    assert got.dtype == torch.float32 and got.shape == (m, n)
    assert torch.equal(got, want)
