"""``ordered_index_add``, what the CUDA embedding and index_select gradients accumulate with:
``index_add_``'s sums, repeated indices included, along any dim (run here on the CPU; the CUDA
tests check that its sums repeat bit for bit)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_it_sums_as_index_add_does(dim: int) -> None:
    from ember.backend.torch.kernels.embedding import ordered_index_add

    g = torch.Generator().manual_seed(dim)
    x = torch.randn((4, 5, 6), generator=g, dtype=torch.float64)
    index = torch.randint(0, x.shape[dim], (9,), generator=g)  # repeats
    shape = list(x.shape)
    shape[dim] = 9
    values = torch.randn(shape, generator=g, dtype=torch.float64)
    before = x.clone()
    got = ordered_index_add(x, dim, index, values)
    torch.testing.assert_close(got, x.clone().index_add_(dim, index, values), rtol=1e-12, atol=0)
    assert torch.equal(x, before)  # a copy: x is untouched
