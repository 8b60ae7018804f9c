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
