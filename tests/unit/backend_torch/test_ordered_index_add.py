"""``ordered_index_add_``, what the CUDA embedding and index_select gradients accumulate with:
``index_add_``'s sums, repeated indices included, along any dim (run here on the CPU; the CUDA
tests check that its sums repeat bit for bit)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_it_sums_as_index_add_does(dim: int) -> None:
    from ember.backend.torch.kernels.embedding import ordered_index_add_

    g = torch.Generator().manual_seed(dim)
    x = torch.randn((4, 5, 6), generator=g, dtype=torch.float64)
    index = torch.randint(0, x.shape[dim], (9,), generator=g)  # repeats
    shape = list(x.shape)
    shape[dim] = 9
    values = torch.randn(shape, generator=g, dtype=torch.float64)
    want = x.clone().index_add_(dim, index, values)
    got = ordered_index_add_(x, dim, index, values)
    assert got is x  # in place
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
