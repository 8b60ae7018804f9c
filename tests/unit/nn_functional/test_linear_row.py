"""F.linear runs as one fused row, with or without a bias, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember import amp
from ember._core import dispatch
from ember.ops import OPS

_rng = np.random.default_rng(0)
X, W, B = _rng.normal(size=(2, 3, 4)), _rng.normal(size=(5, 4)), _rng.normal(size=(5,))


@pytest.mark.parametrize("has_bias", [True, False], ids=["bias", "no_bias"])
def test_linear_is_one_row_and_matches_the_composite(device: em.Device, has_bias: bool) -> None:
    ad = device.autodiff()
    x, w, b = (em.Tensor.from_data(a, device=ad).require_grad() for a in (X, W, B))
    out = F.linear(x, w, b if has_bias else None)
    assert out._node is not None and out._node.spec is OPS["linear"]
    want = X @ W.T + (B if has_bias else 0.0)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-12)
    grads = (out * out).sum().backward()
    g = 2 * want  # d/d out of sum(out^2)
    np.testing.assert_allclose(x.grad(grads).to_numpy(), g @ W, rtol=1e-12)  # type: ignore[union-attr]
    gw = w.grad(grads)
    assert gw is not None
    np.testing.assert_allclose(gw.to_numpy(), g.reshape(-1, 5).T @ X.reshape(-1, 4), rtol=1e-12)
    if has_bias:
        np.testing.assert_allclose(b.grad(grads).to_numpy(), g.sum((0, 1)), rtol=1e-12)  # type: ignore[union-attr]
    else:
        assert b.grad(grads) is None


def test_mixed_dtypes_keep_the_promoting_composite(device: em.Device) -> None:
    x = em.Tensor.from_data(X, device=device, dtype=em.float32)
    w = em.Tensor.from_data(W, device=device, dtype=em.float64)
    out = F.linear(x, w)
    assert out.dtype is em.float64
    np.testing.assert_allclose(out.to_numpy(), X.astype(np.float32) @ W.T, rtol=1e-6)


def test_autocast_leaves_the_no_bias_placeholder_uncast(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = em.Tensor.from_data(X, device=device.autodiff(), dtype=em.float32)
    w = em.Tensor.from_data(W, device=device.autodiff(), dtype=em.float32).require_grad()
    casts: list[tuple[int, ...]] = []
    real = dispatch.cast

    def spy(t: Any, dtype: Any) -> Any:
        casts.append(t.shape)
        return real(t, dtype)

    monkeypatch.setattr(dispatch, "cast", spy)
    with amp.autocast(em.bfloat16):
        out = F.linear(x, w)
    assert out.dtype is em.bfloat16
    assert sorted(casts) == sorted([X.shape, W.shape])  # input and weight, not the placeholder
    grads = out.cast(em.float32).sum().backward()
    gw = w.grad(grads)
    assert gw is not None and gw.dtype is em.float32
