"""``kernels/ordered.py``, what the CUDA embedding, index_select and gather gradients accumulate
with: ``index_add_``'s and ``scatter_add_``'s sums, repeated indices included, along any dim (run
here on the CPU; the CUDA tests check that the sums repeat bit for bit)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_add_sums_as_index_add_does(dim: int) -> None:
    from ember.backend.torch.kernels.ordered import ordered_index_add_

    g = torch.Generator().manual_seed(dim)
    x = torch.randn((4, 5, 6), generator=g, dtype=torch.float64)
    index = torch.randint(0, x.shape[dim], (9,), generator=g)  # repeats
    shape = list(x.shape)
    shape[dim] = 9
    values = torch.randn(shape, generator=g, dtype=torch.float64)
    want = x.clone().index_add_(dim, index, values)
    got = ordered_index_add_(x, dim, index, values)
    assert got is x  # in place
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)  # float64, a few terms


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("smaller", [False, True])
def test_scatter_add_sums_as_scatter_add_does(dim: int, smaller: bool) -> None:
    """Repeated targets along ``dim``; ``smaller``: an index (and a read part of the source)
    smaller than ``x`` in the other dims, as ``scatter_add_`` allows."""
    from ember.backend.torch.kernels.ordered import ordered_scatter_add_

    g = torch.Generator().manual_seed(10 + dim)
    x = torch.randn((4, 5, 6), generator=g, dtype=torch.float64)
    shape = [3, 4, 5] if smaller else [4, 5, 6]
    shape[dim] = 7
    index = torch.randint(0, x.shape[dim], shape, generator=g)
    src_shape = [k + 1 for k in shape] if smaller else shape
    src = torch.randn(src_shape, generator=g, dtype=torch.float64)
    want = x.clone().scatter_add_(dim, index, src)
    got = ordered_scatter_add_(x, dim, index, src)
    assert got is x
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)  # float64, a few terms
