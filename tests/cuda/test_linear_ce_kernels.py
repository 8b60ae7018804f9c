"""The Triton chunk kernels of F.linear_cross_entropy (torch backend, CUDA) against the default
kernels' formulas (ember/backend/families/optional.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(37, 3000), (5, 1024), (64, 17)])
def test_chunk_kernels_match_the_formulas(dtype: str, shape: tuple[int, int]) -> None:
    from ember.backend.torch.kernels import linear_ce

    n, c = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    z = (torch.randn(shape, device="cuda", generator=g) * 4).to(getattr(torch, dtype))
    zw = z.double()
    lse = linear_ce.chunk_logsumexp(z)
    want = torch.logsumexp(zw, dim=1, keepdim=True)
    assert lse.dtype == torch.float32 and lse.shape == (n, 1)
    torch.testing.assert_close(lse.double(), want, rtol=2e-6, atol=2e-6)
    lo = 100
    t = torch.randint(lo - 20, lo + c + 20, (n, 1), device="cuda", generator=g)  # some outside
    gr = torch.rand((n, 1), device="cuda", generator=g)
    for keep, smooth in ((1.0, 0.0), (0.9, 0.1 / 5000)):
        d = linear_ce.ce_chunk_grad(z, lse, t, gr, lo, keep, smooth, z.dtype)
        cols = torch.arange(lo, lo + c, device="cuda")
        hit = (t == cols).double()
        ref = (torch.exp(zw - lse.double()) - keep * hit - smooth) * gr.double()
        assert d.dtype == z.dtype and d.shape == shape
        tol = 1e-5 if dtype == "float32" else 1e-2
        torch.testing.assert_close(d.double(), ref, rtol=tol, atol=tol)
