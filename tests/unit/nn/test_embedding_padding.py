"""``Embedding(padding_idx=)`` as PyTorch: the row starts at zeros, gets no gradient, and reads
its loaded value as a constant; against ``torch.nn.Embedding`` with the same state."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("padding_idx", [0, 3, -1])
def test_matches_torch(device: em.Device, padding_idx: int) -> None:
    em.seed(0)
    ours = em.nn.Embedding(
        5, 3, padding_idx=padding_idx, device=device.autodiff(), dtype=em.float64
    )
    theirs = torch.nn.Embedding(5, 3, padding_idx=padding_idx, dtype=torch.float64)
    p = padding_idx % 5
    assert ours.weight.val().to_numpy()[p].tolist() == [0.0, 0.0, 0.0]
    w = np.random.default_rng(1).standard_normal((5, 3))  # a loaded, non-zero padding row
    theirs.weight.data = torch.tensor(w)
    ours.load_state_dict({"weight": em.Tensor.from_data(w, device=device, dtype=em.float64)})
    idx = np.array([[0, 3, 4], [p, 1, p]])
    out = ours(em.Tensor.from_data(idx, device=device))
    want = theirs(torch.tensor(idx))
    np.testing.assert_array_equal(out.to_numpy(), want.detach().numpy())
    g = np.random.default_rng(2).standard_normal(want.shape)
    (want * torch.tensor(g)).sum().backward()
    grads = (out * em.Tensor.from_data(g, device=device, dtype=em.float64)).sum().backward()
    got = ours.weight.val().grad(grads).to_numpy()
    np.testing.assert_allclose(got, theirs.weight.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert not got[p].any()


def test_bad_padding_idx() -> None:
    with pytest.raises(em.ShapeError, match=r"out of range \[-4, 4\)"):
        em.nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(em.DTypeError, match="int padding_idx"):
        em.nn.Embedding(4, 2, padding_idx=1.0)  # type: ignore[arg-type]
    assert repr(em.nn.Embedding(4, 2, padding_idx=-1)) == "Embedding(4, 2, padding_idx=3)"
