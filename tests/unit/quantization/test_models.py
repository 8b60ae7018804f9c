"""Quantized models: em.quantization.quantize, an adapter trained over a frozen int8 base
(equal to training over the dequantized base), records that round-trip exactly, Observer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember.models.gpt import GPT, GPTConfig
from ember.nn import Embedding, Linear, Module, Param

S = em.QuantScheme
PER_CHANNEL = S(granularity=("channel", 0))


class Adapted(Module):
    """A base layer and a small adapter on its output."""

    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.base = Linear(16, 8, device=device)
        self.adapter = Linear(8, 4, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.adapter(self.base(x).tanh())


def _train(net: Adapted, x: em.Tensor, y: em.Tensor, steps: int = 3) -> list[float]:
    opt = em.optim.SGD(lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = em.nn.functional.mse_loss(net(x), y)
        losses.append(float(loss.item()))
        grads = em.optim.GradientsParams.from_grads(loss.backward(), net)
        opt.step(None, net, grads)
    return losses


@pytest.mark.parametrize("scheme", [PER_CHANNEL, S(mode="affine", granularity=("block", 4))])
def test_adapter_over_a_quantized_base_equals_the_dequantized_base(
    device: em.Device, scheme: em.QuantScheme
) -> None:
    dev = device.autodiff()
    em.seed(7)
    net = Adapted(dev)
    em.seed(7)
    ref = Adapted(dev)
    em.quantization.quantize(net.base, scheme)
    w = net.base.weight.val()
    assert w.is_quantized() and not net.base.weight.is_trainable()
    ref.base.weight = Param(w.dequantize(), require_grad=False)
    rng = np.random.default_rng(8)
    x = em.tensor(rng.normal(size=(12, 16)).astype(np.float32), device=dev)
    y = em.tensor(rng.normal(size=(12, 4)).astype(np.float32), device=dev)
    got, want = _train(net, x, y), _train(ref, x, y)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got[-1] < got[0]  # the adapter (and the base's float bias) learned
    refs = dict(ref.named_parameters())
    for name, p in net.named_parameters():
        a = p.val().dequantize() if p.val().is_quantized() else p.val()
        np.testing.assert_allclose(a.to_numpy(), refs[name].val().to_numpy(), atol=1e-5)
    assert net.base.weight.val() is w  # the int8 base never moved


def test_quantize_model_freezes_the_chosen_weights(device: em.Device) -> None:
    dev = device.autodiff()
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, dropout=0.0)
    gpt = GPT(cfg, device=dev)
    floats = {n: p.val().to_numpy() for n, p in gpt.named_parameters()}
    assert em.quantization.quantize(gpt, PER_CHANNEL) is gpt
    kinds = {n: p.val().is_quantized() for n, p in gpt.named_parameters()}
    linear_or_embedding = {
        f"{n}.weight" for n, m in gpt.named_modules() if isinstance(m, (Linear, Embedding))
    }
    assert {n for n, q in kinds.items() if q} == linear_or_embedding & set(kinds)
    for n, p in gpt.named_parameters():
        if kinds[n]:
            err = np.abs(p.val().dequantize().to_numpy() - floats[n]).max()
            assert err <= np.abs(floats[n]).max() / 127, n
            assert not p.is_trainable() and not p.is_require_grad()
    gpt.valid()
    gpt.train()
    assert all(p.val().is_quantized() == kinds[n] for n, p in gpt.named_parameters())
    assert gpt.lm_head.weight is gpt.wte.weight  # the tied weight: one quantized Param
    ids = em.tensor([[1, 2, 3]], device=dev)
    assert gpt(ids).shape[-1] == 11


def test_quantize_model_errors() -> None:
    net = Linear(4, 2)
    with pytest.raises(em.DTypeError, match=r"expected an em\.nn\.Module"):
        em.quantization.quantize("net", PER_CHANNEL)  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match="QuantScheme"):
        em.quantization.quantize(net, "int8")  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match="module types"):
        em.quantization.quantize(net, PER_CHANNEL, include=(int,))
    em.quantization.quantize(net, PER_CHANNEL, include=Embedding)
    assert not net.weight.val().is_quantized()


@pytest.mark.parametrize("scheme", [PER_CHANNEL, S(mode="affine", granularity=("block", 4))])
def test_records_round_trip_exactly(device: em.Device, tmp_path: Path, scheme: S) -> None:
    def make() -> Module:
        em.seed(3)
        return em.nn.Sequential(Embedding(10, 8, device=device), Linear(8, 4, device=device))

    net = em.quantization.quantize(make(), scheme)
    path = tmp_path / "m.safetensors"
    net.save(path)
    for target in (make(), em.quantization.quantize(make(), S())):
        target.load(path)
        for (n, p), (_, r) in zip(net.named_parameters(), target.named_parameters()):
            a, b = p.val(), r.val()
            assert p.id == r.id and a.is_quantized() == b.is_quantized(), n
            if a.is_quantized():
                assert b.scheme == a.scheme and b.axis == a.axis and not r.is_trainable()
                assert b.device.without_autodiff() == device
                for part in ("_values", "_scales"):
                    np.testing.assert_array_equal(
                        getattr(a, part).to_numpy(), getattr(b, part).to_numpy()
                    )
            else:
                np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
        x = em.tensor([[1, 2, 9]], device=device)
        np.testing.assert_array_equal(net(x).to_numpy(), target(x).to_numpy())


def test_record_mismatches_are_record_errors(tmp_path: Path) -> None:
    net = em.quantization.quantize(Linear(8, 4), PER_CHANNEL)
    path = tmp_path / "m.safetensors"
    net.save(path)
    with pytest.raises(em.ShapeError, match="weight: expected shape"):
        Linear(6, 4).load(path)
    other = em.nn.Sequential(Linear(8, 4))
    with pytest.raises(em.record.RecordError, match="no parameters for"):
        other.load(path)


# ---------------------------------------------------------------- Observer
def test_observer_minmax_and_percentile() -> None:
    rng = np.random.default_rng(9)
    batches = [rng.normal(size=(256,)).astype(np.float32) for _ in range(3)]
    obs = em.quantization.Observer()
    for b in batches:
        assert obs.observe(em.tensor(b)) is not None
    amax = max(np.abs(b).max() for b in batches)
    s, z = obs.scale_zero_point()
    assert z == 0 and s == pytest.approx(amax / 127, rel=1e-6)
    pct = em.quantization.Observer("percentile", percentile=99.0)
    for b in batches:
        pct.observe(em.tensor(b))
    want = np.mean([np.percentile(np.abs(b), 99.0) for b in batches])
    assert pct.scale_zero_point()[0] == pytest.approx(want / 127, rel=1e-5)
    x = em.tensor(batches[0] * 4)  # beyond the calibrated range: saturates
    q = pct.quantize(x)
    assert q.scheme == S() and q._values.to_numpy().max() == 127
    aff = em.quantization.Observer(mode="affine")
    aff.observe(em.tensor(batches[0] + 3.0))
    s, z = aff.scale_zero_point()
    back = aff.quantize(em.tensor(batches[0] + 3.0)).dequantize().to_numpy()
    assert np.abs(back - (batches[0] + 3.0)).max() <= s
    assert z == int(np.clip(-128 - np.round(0.0 / s), -128, 127)) or z <= -128 + 1


def test_observer_feeds_the_int8_product() -> None:
    rng = np.random.default_rng(10)
    w = em.tensor(rng.normal(size=(6, 16)).astype(np.float32)).quantize(PER_CHANNEL)
    obs = em.quantization.Observer()
    x = em.tensor(rng.normal(size=(5, 16)).astype(np.float32))
    obs.observe(x)
    qx = obs.quantize(x)
    out = em.nn.functional.linear(qx, w)
    want = qx.dequantize().to_numpy() @ w.dequantize().to_numpy().T
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_observer_errors() -> None:
    with pytest.raises(em.DTypeError, match="kind"):
        em.quantization.Observer("histogram")
    with pytest.raises(em.ShapeError, match="percentile"):
        em.quantization.Observer("percentile", percentile=0.0)
    obs = em.quantization.Observer()
    with pytest.raises(em.ShapeError, match="nothing observed"):
        obs.scale_zero_point()
    with pytest.raises(em.DTypeError, match="float tensor"):
        obs.observe(em.tensor([1, 2]))
    with pytest.raises(em.DTypeError, match="NaN or inf"):
        obs.observe(em.tensor([1.0, float("nan")]))
