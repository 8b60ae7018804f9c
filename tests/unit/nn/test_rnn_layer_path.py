"""nn.GRU and nn.RNN through the ``recurrent_layer`` row (the path a backend with a fused
recurrent layer takes, as the torch backend on CUDA with cuDNN), forced on the CPU backends,
against torch.nn.GRU / torch.nn.RNN in float64; and the row's bad mode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember.errors import ShapeError

torch = pytest.importorskip("torch")

_CASES = [("GRU", {}), ("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"})]


def _forced(backend: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    dev = (em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")).autodiff()
    seen: list[str] = []

    def takes(self: Any, x: Any, mode: str) -> bool:
        seen.append(mode)
        return True

    monkeypatch.setattr(type(dev.b), "recurrent_layer_takes", takes)
    return dev, seen


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layer,kw", _CASES)
def test_layer_on_the_row_matches_torch(
    backend: str, bias: bool, layer: str, kw: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dev, seen = _forced(backend, monkeypatch)
    em.seed(0)
    args: dict[str, Any] = {"num_layers": 2, "bias": bias, "bidirectional": True, **kw}
    net = getattr(em.nn, layer)(4, 5, device=dev, dtype=em.float64, **args)
    ref = getattr(torch.nn, layer)(4, 5, **args).double()
    ref.load_state_dict({k: torch.as_tensor(v.to_numpy()) for k, v in net.state_dict().items()})
    rng = np.random.default_rng(3)
    x, h0 = rng.normal(size=(6, 3, 4)), rng.normal(size=(4, 3, 5))
    ex = em.tensor(x, device=dev).require_grad()
    out, h = net(ex, em.tensor(h0, device=dev))
    grads = (out.sum() + (h * h).sum()).backward()
    tx = torch.tensor(x, requires_grad=True)
    tout, th = ref(tx, torch.tensor(h0))
    (tout.sum() + (th * th).sum()).backward()
    want_mode = "gru" if layer == "GRU" else f"rnn_{kw['nonlinearity']}"
    assert seen and set(seen) == {want_mode}  # the row path ran, with the layer's cell
    for got, want in ((out, tout), (h, th)):
        np.testing.assert_allclose(got.to_numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ex.grad(grads).to_numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    tparams = dict(ref.named_parameters())
    for name, p in net.named_parameters():
        np.testing.assert_allclose(
            p.val().grad(grads).to_numpy(), tparams[name].grad.numpy(), rtol=1e-10, atol=1e-12,
            err_msg=name,
        )  # fmt: skip


@pytest.mark.parametrize("mode", ["gru", "rnn_tanh"])
def test_second_order_through_the_row(mode: str) -> None:
    # the recorded backward rebuilds the row's residual as gru_seq / rnn_seq rows: the
    # gradient of a gradient norm against torch's double backward
    from ember._core.dispatch import apply
    from ember.ops.registry import OPS

    dev = em.Device.torch("cpu").autodiff()
    g = 3 if mode == "gru" else 1
    rng = np.random.default_rng(5)
    vals = [
        rng.normal(size=(4, 2, 3)), rng.normal(size=(g * 2, 3)) * 0.5,
        rng.normal(size=(g * 2, 2)) * 0.5, rng.normal(size=(g * 2,)) * 0.3,
        rng.normal(size=(g * 2,)) * 0.3, rng.normal(size=(2, 2)),
    ]  # fmt: skip
    ts = [em.tensor(v, device=dev).require_grad() for v in vals]
    out = apply(OPS["recurrent_layer"], tuple(ts), {"mode": mode, "reverse": True})
    (gw,) = em.autodiff.grad((out * out).sum(), [ts[2]], create_graph=True)
    grads = (gw * gw).sum().backward()
    tts = [torch.tensor(v, requires_grad=True) for v in vals]
    x, w_ih, w_hh, b_ih, b_hh, h0 = tts
    kernel = torch.gru if mode == "gru" else torch.rnn_tanh
    tout, _ = kernel(
        x.flip(0), h0[None], [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0, False, False, False
    )
    (tgw,) = torch.autograd.grad((tout * tout).sum(), [w_hh], create_graph=True)
    (tgw * tgw).sum().backward()
    np.testing.assert_allclose(gw.to_numpy(), tgw.detach().numpy(), rtol=1e-10, atol=1e-12)
    for t, tt in zip(ts, tts):
        np.testing.assert_allclose(t.grad(grads).to_numpy(), tt.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_bad_mode_names_the_row() -> None:
    from ember._core.dispatch import apply
    from ember.ops.registry import OPS

    rng = np.random.default_rng(0)
    ins = [rng.normal(size=s) for s in ((2, 1, 3), (4, 3), (4, 1), (4,), (4,), (1, 1))]
    with pytest.raises(ShapeError, match=r"recurrent_layer: expected mode 'gru'.*got 'lstm'"):
        apply(
            OPS["recurrent_layer"],
            tuple(em.tensor(v) for v in ins),
            {"mode": "lstm", "reverse": False},
        )


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
def test_mixed_dtypes_are_refused(backend: str, layer: str) -> None:
    # one dtype for the input, states and weights (torch.nn's rule; cuDNN takes no other)
    from ember.errors import DTypeError

    dev = em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")
    net = getattr(em.nn, layer)(4, 3, device=dev)
    x = em.tensor(np.zeros((5, 2, 4)), device=dev)  # float64
    with pytest.raises(DTypeError, match=rf"{layer}: expected .* float32, got float64"):
        net(x)
    net(x.cast(em.float32))
