"""Models and training steps shared by the capture tests (seeded; eager and captured runs of
the same step start from identical models)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import ember as em
from ember._capture.api import Captured
from ember._capture.signature import walk
from ember.models.gpt import GPT, GPTConfig

F = em.nn.functional
GP = em.optim.GradientsParams


class MLP(em.nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.l1 = em.nn.Linear(6, 16, device=device)
        self.l2 = em.nn.Linear(16, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.l2(F.relu(self.l1(x)))


class CNN(em.nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.conv = em.nn.Conv2d(2, 4, 3, padding=1, bias=False, device=device)  # BN follows
        self.bn = em.nn.BatchNorm2d(4, device=device)
        self.fc = em.nn.Linear(4 * 6 * 6, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(h.reshape((h.shape[0], -1)))


def classify_step(model: Any, optim: Any, x: em.Tensor, y: em.Tensor, lr: float) -> em.Tensor:
    loss = F.cross_entropy(model(x), y)
    optim.step(lr, model, GP.from_grads(loss.backward(), model))
    return loss


def gpt_step(model: Any, optim: Any, x: em.Tensor, y: em.Tensor, lr: float) -> em.Tensor:
    logits = model(x)
    loss = F.cross_entropy(logits.reshape((-1, logits.shape[-1])), y.reshape((-1,)))
    optim.step(lr, model, GP.from_grads(loss.backward(), model))
    return loss


def micro_step(model: Any, x: em.Tensor, y: em.Tensor, scale: float) -> Any:
    """One micro-batch of gradient accumulation: its gradients, scaled."""
    loss = F.cross_entropy(model(x), y) * scale
    return loss, GP.from_grads(loss.backward(), model)


def apply_step(model: Any, optim: Any, grads: Any, lr: float) -> None:
    optim.step(lr, model, grads)


class ReplayByCalling:
    def record(self, thunk: Any, device: em.Device, unchanged: list[Any]) -> Any:
        saved = [a.clone() for a in unchanged]
        rng = device.b.rng_state()
        self._thunk = thunk
        out = self._first = thunk()
        for a, s in zip(unchanged, saved):
            a.copy_(s)
        device.b.set_rng_state(rng)
        return out

    def replay(self) -> None:
        # a graph's outputs live at fixed addresses: the new values go into the recorded ones
        new = _tensors(self._thunk())
        for dst, src in zip(_tensors(self._first), new):
            dst._raw.copy_(src._raw)


def _tensors(out: Any) -> list[em.Tensor]:
    leaves = walk((out,), {})[2]
    return [leaves.values[i] for i in leaves.tensors]


def recorder(fn: Any, device: em.Device, **kw: Any) -> Any:
    """``em.capture(fn)`` on CUDA; on torch CPU the recording's structure through
    ``ReplayByCalling``; on NumPy ``None`` (it records nothing)."""
    if device.is_cuda:
        return em.capture(fn, **kw)
    if device.b.name == "torch":
        kw.setdefault("max_recordings", 8)
        return Captured(fn, fallback=False, graph=ReplayByCalling, record_cpu=True, **kw)
    return None


def batches(
    device: em.Device, n: int, shape: tuple[int, ...], classes: int, *, seed: int = 0
) -> Iterator[tuple[em.Tensor, em.Tensor]]:
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, classes, size=shape[0])
        yield em.tensor(x, device=device), em.tensor(y, device=device)


def token_batches(
    device: em.Device, n: int, b: int, t: int, vocab: int, *, seed: int = 0
) -> Iterator[tuple[em.Tensor, em.Tensor]]:
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.integers(0, vocab, size=(b, t))
        y = rng.integers(0, vocab, size=(b, t))
        yield em.tensor(x, device=device), em.tensor(y, device=device)


def tiny_gpt(device: em.Device) -> GPT:
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.2)
    return GPT(cfg, device=device)


def build(make: Callable[[em.Device], Any], device: em.Device, seed: int = 0) -> Any:
    em.seed(seed)
    return make(device.autodiff())


def params(model: Any) -> dict[str, np.ndarray]:
    return {n: p.val().to_numpy() for n, p in model.named_parameters()}


def buffers(model: Any) -> dict[str, np.ndarray]:
    return {n: b.to_numpy() for n, b in model.named_buffers()}
