"""A training step on the torch backend never reads values back to the host.

On CUDA a host read is a synchronisation (``tests/cuda`` checks that with
``torch.cuda.set_sync_debug_mode("error")``); on the CPU this test makes every host read raise
instead, and has torch CPU devices take the CUDA code paths (``Device.is_cuda``), so the same
property is checked in CI.
"""

from __future__ import annotations

from typing import Any

import pytest

import ember as em
import ember.nn.functional as F
from ember import amp

torch = pytest.importorskip("torch")
from ember.backend.torch.backend import TorchBackend  # noqa: E402


class TinyGPT(em.nn.Module):
    """Embedding, one pre-norm attention + MLP block, LM head: (B, T) ids -> (B, T, V)."""

    def __init__(self, vocab: int, width: int, heads: int, context: int, device: em.Device):
        super().__init__()
        self.heads = heads
        self.wte = em.nn.Embedding(vocab, width, device=device)
        self.wpe = em.nn.Embedding(context, width, device=device)
        self.ln1 = em.nn.LayerNorm(width, device=device)
        self.qkv = em.nn.Linear(width, 3 * width, device=device)
        self.proj = em.nn.Linear(width, width, device=device)
        self.ln2 = em.nn.LayerNorm(width, device=device)
        self.fc = em.nn.Linear(width, 4 * width, device=device)
        self.fc_proj = em.nn.Linear(4 * width, width, device=device)
        self.head = em.nn.Linear(width, vocab, bias=False, device=device)

    def forward(self, idx: em.Tensor) -> em.Tensor:
        B, T = idx.shape
        H = self.heads
        x = self.wte(idx) + self.wpe(em.Tensor.arange(0, T, device=idx.device.without_autodiff()))
        C = x.shape[-1]
        q, k, v = self.qkv(self.ln1(x)).split(C, 2)
        # (B, T, C) -> (B, H, T, C // H)
        q, k, v = (t.reshape((B, T, H, C // H)).swap_dims(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.swap_dims(1, 2).reshape((B, T, C)))
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.head(x)


def train_step(model: TinyGPT, optim: Any, idx: em.Tensor, tgt: em.Tensor, low: Any) -> Any:
    """Forward, loss, backward and optimizer update, optionally under ``amp.autocast(low)``."""
    with amp.autocast(low or em.bfloat16, enabled=low is not None):
        logits = model(idx)
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.reshape((B * T, V)), tgt.reshape((B * T,)))
    grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
    return optim.step(1e-3, model, grads), loss


def refuse_host_reads(m: pytest.MonkeyPatch) -> None:
    """Make every way of reading a torch tensor back to the host raise, through ``m``."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a host read inside the training step")

    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "numpy", "cpu"):
        m.setattr(torch.Tensor, name, refuse)
    m.setattr(TorchBackend, "to_numpy", refuse)
    m.setattr(TorchBackend, "to_numpy_view", refuse)
    m.setattr(em.Device, "is_cuda", property(lambda d: d.backend_name == "torch"))


@pytest.mark.parametrize("low", [None, em.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("strategy", ["disabled", "balanced"])
def test_training_step_reads_nothing_back(
    low: Any, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    em.seed(0)
    dev = em.Device.torch("cpu")
    ad = dev.autodiff()
    if strategy == "balanced":
        ad = ad.gradient_checkpointing()
    model = TinyGPT(vocab=32, width=16, heads=2, context=8, device=ad)
    optim = em.optim.AdamW(grad_clipping=em.optim.GradientClipping.norm(1.0))
    idx = em.Tensor.random((2, 8), em.Distribution.uniform(0, 32), device=dev).int()
    tgt = em.Tensor.random((2, 8), em.Distribution.uniform(0, 32), device=dev).int()
    model, first = train_step(model, optim, idx, tgt, low)  # the first step may set things up
    with monkeypatch.context() as m:
        refuse_host_reads(m)
        for _ in range(3):
            model, loss = train_step(model, optim, idx, tgt, low)
    assert loss.item() < first.item()  # and it trains


class NormNet(em.nn.Module):
    """Linear -> BatchNorm1d -> ReLU -> Linear -> BatchNorm1d (cumulative average) -> Linear."""

    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.l1 = em.nn.Linear(6, 8, device=device)
        self.bn1 = em.nn.BatchNorm1d(8, device=device)
        self.l2 = em.nn.Linear(8, 8, device=device)
        self.bn2 = em.nn.BatchNorm1d(8, momentum=None, device=device)
        self.l3 = em.nn.Linear(8, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.l3(self.bn2(self.l2(F.relu(self.bn1(self.l1(x))))))


@pytest.mark.parametrize("kind", ["norm", "value"])
def test_batch_norm_and_clipping_step_reads_nothing_back(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    em.seed(1)
    dev = em.Device.torch("cpu")
    model = NormNet(dev.autodiff())
    clip = em.optim.GradientClipping.norm(0.5) if kind == "norm" else None
    if kind == "value":
        clip = em.optim.GradientClipping.value(0.1)
    optim = em.optim.SGD(momentum=0.9, grad_clipping=clip)
    x = em.Tensor.random((16, 6), em.Distribution.normal(0.0, 1.0), device=dev)
    y = em.Tensor.random((16,), em.Distribution.uniform(0, 3), device=dev).int()

    def step(model: NormNet) -> tuple[NormNet, em.Tensor]:
        loss = F.cross_entropy(model(x), y)
        grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
        return optim.step(0.05, model, grads), loss

    model, first = step(model)
    with monkeypatch.context() as m:
        refuse_host_reads(m)
        for _ in range(3):
            model, loss = step(model)
    assert loss.item() < first.item()
    assert int(model.bn2.num_batches_tracked.item()) == 4
