"""nn.LSTM through the ``lstm_layer`` row (the path a backend with a fused LSTM layer takes, as
the torch backend on CUDA with cuDNN), forced on the CPU backends, against torch.nn.LSTM."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_on_the_layer_row_matches_torch(
    backend: str, bias: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = (em.Device.cpu() if backend == "numpy" else em.Device.torch("cpu")).autodiff()
    monkeypatch.setattr(type(dev.b), "lstm_layer_takes", lambda self, x: True)
    em.seed(0)
    lstm = em.nn.LSTM(
        4, 5, num_layers=2, bias=bias, bidirectional=True, device=dev, dtype=em.float64
    )
    ref = torch.nn.LSTM(4, 5, num_layers=2, bias=bias, bidirectional=True).double()
    ref.load_state_dict({k: torch.as_tensor(v.to_numpy()) for k, v in lstm.state_dict().items()})
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 3, 4))
    h0, c0 = rng.normal(size=(4, 3, 5)), rng.normal(size=(4, 3, 5))
    ex = em.tensor(x, device=dev).require_grad()
    out, (h, c) = lstm(ex, (em.tensor(h0, device=dev), em.tensor(c0, device=dev)))
    grads = (out.sum() + (h * h).sum() + (c * 0.5).sum()).backward()
    tx = torch.tensor(x, requires_grad=True)
    tout, (th, tc) = ref(tx, (torch.tensor(h0), torch.tensor(c0)))
    (tout.sum() + (th * th).sum() + (tc * 0.5).sum()).backward()
    for got, want in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(got.to_numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ex.grad(grads).to_numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    tparams = dict(ref.named_parameters())
    for name, p in lstm.named_parameters():
        np.testing.assert_allclose(
            p.val().grad(grads).to_numpy(), tparams[name].grad.numpy(), rtol=1e-10, atol=1e-12,
            err_msg=name,
        )  # fmt: skip
