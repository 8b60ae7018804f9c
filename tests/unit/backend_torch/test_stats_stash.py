"""Forward statistics reach the backward through views rebuilt over the same buffer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
stats = pytest.importorskip("ember.backend.torch.kernels.stats")
attention = pytest.importorskip("ember.backend.torch.kernels.attention")

import ember as em  # noqa: E402
import ember.nn.functional as F  # noqa: E402


def test_a_view_rebuilt_over_the_same_buffer_finds_the_entry() -> None:
    base = torch.arange(24.0).reshape(2, 12)
    q = base[:, :4].reshape(2, 2, 2)
    stats._remember(q, "t", (1.5,), "kept")
    again = base[:, :4].reshape(2, 2, 2)  # another object, same memory and layout
    assert again is not q
    assert stats._recall(again, "t", (1.5,)) == "kept"
    assert stats._recall(again, "t", (2.5,)) is None  # other attributes: not this call
    assert stats._recall(base[:, 4:8].reshape(2, 2, 2), "t", (1.5,)) is None  # other memory
    base.add_(1.0)  # an in-place write bumps the version: the entry is stale
    assert stats._recall(again, "t", (1.5,)) is None


def test_one_entry_per_layout_does_not_grow() -> None:
    x = torch.ones(4, 4)
    for i in range(10):
        stats._remember(x, "t", (i,), i)
    assert len(x.__dict__["_ember_t"]) == 1
    assert stats._recall(x, "t", (9,)) == 9


def test_balanced_attention_backward_reuses_the_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Balanced, q/k/v are recomputed views of the kept projection: no second forward."""
    calls: list[str] = []
    real = attention._fused_forward

    def counting(kind: str, *args: Any) -> Any:
        calls.append(kind)
        return real(kind, *args)

    monkeypatch.setattr(attention, "_fused_forward", counting)
    dev = em.Device.torch("cpu").autodiff().gradient_checkpointing()
    rng = np.random.default_rng(0)
    x = em.tensor(rng.normal(size=(2, 8, 12)).astype(np.float32), device=dev).require_grad()
    w = em.tensor(rng.normal(size=(12, 12)).astype(np.float32), device=dev).require_grad()
    q, k, v = (x @ w).split(4, 2)
    q, k, v = (t.reshape((2, 8, 2, 2)).swap_dims(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = y.sum().backward()
    assert calls == ["flash_cpu"]  # the forward's log-sum-exp was found again
    assert x.grad(g) is not None and w.grad(g) is not None
