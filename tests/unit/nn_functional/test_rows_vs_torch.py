"""Every nn row against its PyTorch reference: forward values and autograd gradients, float64.

Cases come from each row's ``examples``; references from ``tests/differential/refs/nn.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from differential.refs.nn import REFS
from helpers.sampling import is_float, sample_cases, to_tensors

import ember as em
from ember._core.dispatch import apply
from ember.ops.registry import OPS, Cost

NAMES = sorted(REFS)


def test_every_nn_row_has_a_reference() -> None:
    mine = {
        "relu", "gelu", "silu", "sigmoid", "softmax", "log_softmax", "layer_norm", "rms_norm",
        "batch_norm", "cross_entropy", "cross_entropy_soft", "nll_loss", "binary_cross_entropy",
        "binary_cross_entropy_with_logits", "attention", "embedding", "conv2d",
        "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
        "linear_cross_entropy", "max_pool2d_indices", "max_unpool2d",
    }  # fmt: skip
    assert mine == set(NAMES)
    assert mine <= set(OPS)


@pytest.mark.parametrize("name", NAMES)
def test_row_matches_torch(name: str) -> None:
    spec = OPS[name]
    rng = np.random.default_rng(7)
    device = em.Device.cpu().autodiff()
    for arrays, attrs in sample_cases(spec, rng):
        xs = to_tensors(arrays, device, require_grad=True)
        out = apply(spec, tuple(xs), attrs)
        ts = [
            torch.tensor(a, dtype=torch.float64, requires_grad=True)
            if is_float(a)
            else torch.tensor(a)
            for a in arrays
        ]
        ref = REFS[name](*ts, **attrs)
        np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
        if not out.dtype.is_float:  # max_pool2d_indices: exact, no gradient
            assert out.dtype.name == "int64" and not out.is_tracked()
            continue
        w = rng.normal(size=ref.shape)
        grads = (out * em.tensor(w, dtype=em.float64)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        for x, t, a in zip(xs, ts, arrays):
            if not is_float(a):
                continue
            g = x.grad(grads)
            assert g is not None
            # PyTorch leaves unused inputs (a 0-d "no bias") without a gradient: zero
            want = t.grad.numpy() if t.grad is not None else np.zeros(a.shape)
            np.testing.assert_allclose(
                g.to_numpy(), want, rtol=1e-9, atol=1e-11, err_msg=f"{name} {attrs}"
            )


def test_cost_classes_follow_semantics() -> None:
    # SEMANTICS.md section 7: activations, softmax / log-softmax and the normalisation rows are
    # memory-bound (one pass); conv, pooling, attention and the other fused rows compute-bound
    memory_bound = {"relu", "gelu", "silu", "sigmoid", "binary_cross_entropy",
                    "binary_cross_entropy_with_logits", "softmax", "log_softmax", "layer_norm",
                    "rms_norm", "batch_norm"}  # fmt: skip
    for name in NAMES:
        want = Cost.MEMORY_BOUND if name in memory_bound else Cost.COMPUTE_BOUND
        assert OPS[name].cost is want, name
