"""The mixed-precision policy (``ember.amp``) on torch CPU tensors."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember import amp
from ember._core import dispatch

pytest.importorskip("torch")
DEV = em.Device.torch("cpu")


def _normal(shape: tuple[int, ...], device: em.Device, std: float = 1.0) -> em.Tensor:
    return em.Tensor.random(shape, em.Distribution.normal(0.0, std), device=device)


@pytest.mark.parametrize("low", [em.bfloat16, em.float16])
def test_linear_computes_low_precision_and_float32_params_get_float32_grads(low: em.DType) -> None:
    em.seed(0)
    d = DEV.autodiff()
    x = _normal((8, 16), d)
    w = _normal((4, 16), d, 0.3).require_grad()
    b = _normal((4,), d).require_grad()
    target = em.tensor([0, 1, 2, 3, 0, 1, 2, 3], device=DEV)
    with amp.autocast(low):
        y = F.linear(x, w, b)
        loss = F.cross_entropy(y, target)
    assert y.dtype is low  # the bias joined the low-precision product
    assert loss.dtype is em.float32  # losses run in float32
    g = loss.backward()
    gw, gb = w.grad(g), b.grad(g)
    assert gw is not None and gb is not None
    assert gw.dtype is gb.dtype is em.float32
    ref = F.cross_entropy(F.linear(x, w, b), target)
    rg = ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=2e-2)
    np.testing.assert_allclose(gw.to_numpy(), w.grad(rg).to_numpy(), rtol=0.1, atol=2e-2)


def test_full_precision_ops_and_residual_promotion() -> None:
    x = _normal((3, 5), DEV).cast(em.bfloat16)
    r = _normal((3, 5), DEV)
    with amp.autocast(em.bfloat16):
        assert F.softmax(x, 1).dtype is em.float32
        assert F.layer_norm(x, (5,)).dtype is em.float32
        assert (x + r).dtype is em.float32  # same-size operands promote: a float32 residual
        assert (x * em.Tensor.ones((5,), device=DEV)).dtype is em.bfloat16  # a broadcast bias
    assert F.softmax(x, 1).dtype is em.bfloat16  # the policy ended with the block


def test_attention_runs_in_low_precision_and_returns_float32_grads() -> None:
    d = DEV.autodiff()
    q, k, v = (_normal((2, 2, 4, 8), d).require_grad() for _ in range(3))
    with amp.autocast(em.bfloat16):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype is em.bfloat16
    g = out.cast(em.float32).sum().backward()
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rg = ref.sum().backward()
    np.testing.assert_allclose(out.to_numpy().astype(np.float32), ref.to_numpy(), atol=5e-2)
    for t in (q, k, v):
        gt = t.grad(g)
        assert gt is not None and gt.dtype is em.float32
        np.testing.assert_allclose(gt.to_numpy(), t.grad(rg).to_numpy(), atol=0.1)


def test_autocast_nests_restores_and_can_be_disabled() -> None:
    assert amp.current_policy() is None
    with amp.autocast(em.bfloat16) as outer:
        assert amp.current_policy() is outer
        with amp.autocast(enabled=False) as inner:
            assert inner is None and amp.current_policy() is None
        with amp.autocast(em.float16):
            assert amp.current_policy() is not None
            assert amp.current_policy().dtype is em.float16
        assert amp.current_policy() is outer
    assert dispatch.autocast_policy() is None
    with pytest.raises(em.DTypeError, match=r"bfloat16 or em\.float16"):
        amp.Policy(em.float32)


class _Tiny(em.nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.lin = em.nn.Linear(3, 2, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.lin(x)


def test_grad_scaler_scales_skips_overflow_and_adapts() -> None:
    d = DEV.autodiff()
    model = _Tiny(d)
    optim = em.optim.SGD()
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=2)
    x = _normal((4, 3), d)
    before = model.lin.weight.val().to_numpy()
    loss = model(x).sum()
    grads = em.optim.GradientsParams.from_grads(scaler.scale(loss).backward(), model)
    wid = model.lin.weight.id
    scaled = grads.get(wid)
    assert scaled is not None
    model = scaler.step(optim, 0.1, model, grads)
    # SGD with the unscaled gradient: the weight gradient of sum(x @ w.T) is x summed over rows
    want = before - 0.1 * x.sum_dim(0).to_numpy() * np.ones((2, 1))
    np.testing.assert_allclose(model.lin.weight.val().to_numpy(), want, rtol=1e-5)
    assert scaler.scale_value == 8.0
    # an overflowing gradient: the step is skipped and the scale backs off
    bad = em.optim.GradientsParams()
    bad.register(wid, em.Tensor.full((2, 3), float("inf"), device=DEV))
    kept = model.lin.weight.val().to_numpy()
    model = scaler.step(optim, 0.1, model, bad)
    np.testing.assert_array_equal(model.lin.weight.val().to_numpy(), kept)
    assert scaler.scale_value == 4.0
    scaler.update(True)
    scaler.update(True)
    assert scaler.scale_value == 8.0  # grew after growth_interval clean steps
