"""Attention rows with every key masked out, and broadcast k/v batch dims (issue 12, item 5).

PyTorch's attention gives 0 for a query row whose scores are all -inf and passes no gradient
through it; ember follows it on both backends, forward and backward. k and v may have fewer (or
size-1) batch dims than q, as in PyTorch, on every path the torch backend takes.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = {
    "float32": (em.float32, torch.float32, 1e-5),
    "float64": (em.float64, torch.float64, 1e-12),
}


def _draw(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


def _ember_grads(
    device: em.Device, arrays: list[np.ndarray], dtype: em.DType, mask: np.ndarray | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    ad = device.autodiff()
    q, k, v = (em.Tensor.from_data(a, device=ad, dtype=dtype).require_grad() for a in arrays)
    m = None if mask is None else em.Tensor.from_data(mask, device=device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    w = em.Tensor.from_data(
        np.linspace(-1.0, 1.0, int(np.prod(out.shape))).reshape(out.shape), device=ad, dtype=dtype
    )
    grads = (out * w).sum().backward()
    gs = []
    for t in (q, k, v):
        g = t.grad(grads)
        assert g is not None
        gs.append(g.to_numpy())
    return out.to_numpy(), gs


def _torch_grads(
    arrays: list[np.ndarray], dtype: torch.dtype, mask: np.ndarray | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    q, k, v = (torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays)
    m = None if mask is None else torch.tensor(mask)
    out = TF.scaled_dot_product_attention(q, k, v, attn_mask=m)
    w = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float64).reshape(out.shape).to(dtype)
    (out * w).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in (q, k, v)]  # type: ignore[union-attr]


def _check(
    device: em.Device, arrays: list[np.ndarray], dtype_name: str, mask: np.ndarray | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    edt, tdt, rtol = DTYPES[dtype_name]
    out, grads = _ember_grads(device, arrays, edt, mask)
    ref, ref_grads = _torch_grads(arrays, tdt, mask)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol)
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=rtol, atol=rtol)
    return out, grads


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_a_fully_masked_bool_row_gives_zero_and_no_gradient(
    device: em.Device, dtype_name: str
) -> None:
    arrays = _draw(1, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8))
    mask = np.ones((4, 5), dtype=bool)
    mask[2] = False  # query 2 may attend to nothing
    out, (gq, _, _) = _check(device, arrays, dtype_name, mask)
    assert np.all(out[..., 2, :] == 0.0)
    assert np.all(gq[..., 2, :] == 0.0)
    assert np.isfinite(out).all() and np.isfinite(gq).all()


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_a_float_mask_row_of_minus_inf_gives_zero(device: em.Device, dtype_name: str) -> None:
    arrays = _draw(2, (3, 4, 8), (3, 5, 8), (3, 5, 6))
    mask = np.zeros((3, 4, 5))
    mask[1, 0] = -np.inf
    mask[0, 3, 1:] = -np.inf  # a partly masked row stays an ordinary softmax
    out, (gq, gk, gv) = _check(
        device,
        arrays,
        dtype_name,
        mask.astype(np.float32 if dtype_name == "float32" else np.float64),
    )
    assert np.all(out[1, 0] == 0.0) and np.all(gq[1, 0] == 0.0)
    assert np.isfinite(gk).all() and np.isfinite(gv).all()


def test_a_padded_batch_gives_a_finite_loss(device: em.Device) -> None:
    """Two sequences padded to one length: padding queries see no key; the loss stays finite."""
    (x,) = _draw(3, (2, 6, 8))
    lengths = [6, 3]
    valid = np.array([[i < n for i in range(6)] for n in lengths])  # (B, S)
    mask = (valid[:, :, None] & valid[:, None, :])[:, None]  # (B, 1, L, S): padding sees nothing
    ad = device.autodiff()
    t = em.Tensor.from_data(x[:, None], device=ad, dtype=em.float32).require_grad()
    out = F.scaled_dot_product_attention(
        t, t, t, attn_mask=em.Tensor.from_data(mask, device=device)
    )
    loss = (out * out).sum()
    grads = loss.backward()
    assert np.isfinite(loss.item())
    g = t.grad(grads)
    assert g is not None and np.isfinite(g.to_numpy()).all()
    assert np.all(out.to_numpy()[1, 0, 3:] == 0.0)


def test_a_nan_score_keeps_its_row_nan(device: em.Device) -> None:
    q, k, v = _draw(4, (1, 3, 8), (1, 4, 8), (1, 4, 8))
    q[0, 1, 0] = np.nan
    mask = np.ones((3, 4), dtype=bool)
    mask[1, 1:] = False  # not every score of the NaN row is -inf: the NaN is not hidden
    ad = device.autodiff()
    tq, tk, tv = (em.Tensor.from_data(a, device=ad, dtype=em.float64) for a in (q, k, v))
    out = F.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=em.Tensor.from_data(mask, device=device)
    )
    got = out.to_numpy()
    assert np.isnan(got[0, 1]).all() and np.isfinite(got[0, [0, 2]]).all()


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize(
    "kv_shape", [(5, 8), (1, 3, 5, 8), (2, 1, 5, 8), (1, 1, 5, 8), (3, 5, 8)], ids=str
)
def test_k_and_v_batch_dims_broadcast_as_in_pytorch(
    device: em.Device, dtype_name: str, kv_shape: tuple[int, ...]
) -> None:
    """Rank-2 and size-1 batch dims of k/v: the torch backend's fused CPU kernel can't take them."""
    arrays = _draw(5, (2, 3, 4, 8), kv_shape, kv_shape)
    out, _ = _check(device, arrays, dtype_name, None)
    assert out.shape == (2, 3, 4, 8)
