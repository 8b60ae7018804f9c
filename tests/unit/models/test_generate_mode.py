"""``GPT.generate`` restores the caller's mode (issue 18: a backward after it failed)."""

from __future__ import annotations

import numpy as np

import ember as em
from ember.models.gpt import GPT, GPTConfig

CFG = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, dropout=0.1)


def _loss(model: GPT, device: em.Device) -> em.Tensor:
    ids = em.Tensor.from_data(np.arange(8).reshape(1, 8) % 11, device=device)
    logits = model(ids)
    return em.nn.functional.cross_entropy(logits.reshape((-1, 11)), ids.reshape((-1,)))


def test_generate_keeps_training_mode(device: em.Device) -> None:
    model = GPT(CFG, device=device.autodiff())
    out = model.generate(np.zeros((1, 1), np.int64), 3, seed=0)
    assert out.shape == (1, 4)
    assert model.training and all(p.val().is_require_grad() for p in model.parameters())
    grads = _loss(model, device).backward()  # raised "expected a tracked tensor" before
    assert model.wte.weight.val().grad(grads) is not None


def test_generate_keeps_valid_mode(device: em.Device) -> None:
    model = GPT(CFG, device=device.autodiff()).valid()
    model.generate(np.zeros((1, 2), np.int64), 2, seed=0)
    assert not model.training
    assert not any(p.val().is_autodiff() for p in model.parameters())


def test_generate_restores_the_mode_when_it_fails(device: em.Device) -> None:
    model = GPT(CFG, device=device.autodiff())
    bad = np.full((1, 2), 99, np.int64)  # ids beyond the vocabulary: embedding raises
    try:
        model.generate(bad, 1)
    except em.ShapeError:
        pass
    else:
        raise AssertionError("an id beyond the vocabulary must raise")
    assert model.training and model.wte.weight.val().is_require_grad()
