"""Attention dropout drawn inside CUDA's fused kernels (the ``attention_dropout`` row).

The mask never exists as a tensor: the forward kernel draws it from the device's generator and
the backward draws it again from the saved seed and offset. These checks need CUDA and skip
cleanly without it.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SHAPE = (2, 3, 64, 32)  # (B, H, L, E)


def _qkv(dtype: em.DType, seed: int = 0) -> tuple[em.Tensor, em.Tensor, em.Tensor]:
    rng = np.random.default_rng(seed)
    dev = em.Device.cuda(0).autodiff()
    return tuple(  # type: ignore[return-value]
        em.Tensor.from_data(rng.normal(size=SHAPE), device=dev, dtype=dtype).require_grad()
        for _ in range(3)
    )


@pytest.mark.parametrize("dtype", [em.float32, em.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_one_fused_row_seeded_and_reproducible(dtype: em.DType, causal: bool) -> None:
    q, k, v = _qkv(dtype)
    em.seed(3)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25, is_causal=causal)
    assert a._node is not None and a._node.spec.name == "attention_dropout"
    em.seed(3)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25, is_causal=causal)
    c = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25, is_causal=causal)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())  # same seed, same mask
    assert not np.array_equal(b.to_numpy(), c.to_numpy())  # the stream moved on
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=causal).to_numpy()
    assert not np.array_equal(a.to_numpy(), plain)


def test_backward_uses_the_forward_mask() -> None:
    # out = A v with A the dropped attention weights, so <out, w> = <v, A^T w> = <v, grad v>
    # holds only when the backward redraws the forward's mask
    q, k, v = _qkv(em.float32, seed=1)
    w = em.Tensor.from_data(
        np.random.default_rng(2).normal(size=SHAPE), device=em.Device.cuda(0), dtype=em.float32
    )
    em.seed(0)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    grads = (out * w).sum().backward()
    lhs = float((out.detach() * w).sum().item())
    rhs = float((v.detach() * v.grad(grads)).sum().item())
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))


def test_drop_rate_and_scale() -> None:
    # v = ones: each output element is the kept weights' sum times 1 / (1 - p), mean 1
    dev = em.Device.cuda(0).autodiff()
    q = em.Tensor.zeros((4, 4, 256, 32), device=dev, dtype=em.bfloat16)
    v = em.Tensor.ones((4, 4, 256, 32), device=dev, dtype=em.bfloat16)
    em.seed(0)
    out = F.scaled_dot_product_attention(q.require_grad(), q, v, dropout_p=0.5).to_numpy()
    assert abs(float(out.astype(np.float64).mean()) - 1.0) < 0.02


def test_checkpointing_never_redraws() -> None:
    # Balanced and a tight budget keep the row's output (it is never recomputed): gradients
    # equal Disabled's bit for bit
    def grads(dev: em.Device) -> list[np.ndarray]:
        rng = np.random.default_rng(5)
        x = em.Tensor.from_data(rng.normal(size=(2, 64, 96)), device=dev, dtype=em.float32)
        w = em.Tensor.from_data(rng.normal(size=(96, 96)) * 0.1, device=dev).require_grad()
        em.seed(1)
        h = (x @ w).reshape((2, 64, 3, 32)).permute(0, 2, 1, 3)
        y = F.scaled_dot_product_attention(h, h * 0.5, h.tanh(), dropout_p=0.2, is_causal=True)
        g = (y * y).sum().backward()
        return [w.grad(g).to_numpy()]

    base = em.Device.cuda(0).autodiff()
    ref = grads(base)
    for strat in (
        base.gradient_checkpointing(),
        base.gradient_checkpointing(budget=em.GradientCheckpointingStrategy.budget(fraction=0.3)),
    ):
        for a, b in zip(ref, grads(strat)):
            np.testing.assert_array_equal(a, b)
