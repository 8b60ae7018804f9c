"""cuDNN's whole-layer GRU / Elman RNN behind the ``recurrent_layer`` row (torch backend, CUDA)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

_MODES = {"gru": 3, "rnn_tanh": 1, "rnn_relu": 1}  # gates per cell


def test_every_mode_is_on() -> None:
    # this file passed on an H200 with every mode: nn.GRU / nn.RNN take cuDNN on CUDA
    from ember.backend.torch.kernels import cudnn_rnn

    assert cudnn_rnn.DEVICE_VERIFIED == frozenset(cudnn_rnn.MODES)


def _inputs(rng: np.random.Generator, mode: str, bias: bool) -> list[np.ndarray]:
    steps, batch, n_in, hid = 7, 3, 5, 6
    g = _MODES[mode] * hid
    n = rng.normal
    biases = [n(size=(g,)) * 0.3 for _ in range(2)] if bias else [np.zeros(())] * 2
    return [
        n(size=(steps, batch, n_in)), n(size=(g, n_in)) * 0.4, n(size=(g, hid)) * 0.4, *biases,
        n(size=(batch, hid)),
    ]  # fmt: skip


@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_cudnn_equals_the_generic_row_in_float64(mode: str, reverse: bool, bias: bool) -> None:
    from ember._core.dispatch import apply
    from ember.ops.registry import OPS

    vals = _inputs(np.random.default_rng(0), mode, bias)
    gw = np.random.default_rng(1).normal(size=(7, 3, 6))
    results = []
    for dev in (em.Device.cuda(0).autodiff(), em.Device.torch("cpu").autodiff()):
        ts = [em.tensor(v, device=dev) for v in vals]
        ts = [t if t.ndim == 0 else t.require_grad() for t in ts]  # 0-d biases: none
        ptrs = [t._raw.data_ptr() for t in ts]
        node_out = apply(OPS["recurrent_layer"], tuple(ts), {"mode": mode, "reverse": reverse})
        grads = (node_out * em.tensor(gw, device=dev)).sum().backward()
        results.append([node_out.to_numpy(), *(t.grad(grads).to_numpy() for t in ts if t.ndim)])
        for t, v, p in zip(ts, vals, ptrs):  # packing cuDNN's weights left the inputs alone
            assert t._raw.data_ptr() == p
            np.testing.assert_array_equal(t.to_numpy(), v)
    cuda = em.Device.cuda(0)
    assert cuda.b.recurrent_layer_takes(em.tensor(vals[0], device=cuda)._raw, mode)
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_cudnn_runs_the_row_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    # the row's forward took cuDNN's kernel (its residuals a tuple), not the generic recurrence
    from ember.backend.torch.kernels import cudnn_rnn

    calls: list[str] = []
    real = cudnn_rnn.forward

    def spy(*args: Any) -> Any:
        calls.append(args[-2])
        return real(*args)

    monkeypatch.setattr(cudnn_rnn, "forward", spy)
    dev = em.Device.cuda(0).autodiff()
    gru = em.nn.GRU(4, 8, device=dev)
    x = np.random.default_rng(0).normal(size=(5, 2, 4)).astype(np.float32)
    out, _ = gru(em.tensor(x, device=dev))
    out.sum().backward()
    assert calls == ["gru"]


@pytest.mark.parametrize(
    "layer,kw", [("GRU", {}), ("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"})]
)
def test_layer_matches_torch(layer: str, kw: dict[str, str]) -> None:
    # nn.GRU / nn.RNN (2 layers, bidirectional) on CUDA through cuDNN, against torch's layer
    # with the same state_dict, float32: forward, final state and every gradient
    em.seed(0)
    dev = em.Device.cuda(0).autodiff()
    net = getattr(em.nn, layer)(8, 16, num_layers=2, bidirectional=True, device=dev, **kw)
    ref = getattr(torch.nn, layer)(8, 16, num_layers=2, bidirectional=True, **kw).cuda()
    ref.load_state_dict({k: torch.as_tensor(v.to_numpy()) for k, v in net.state_dict().items()})
    x = np.random.default_rng(2).normal(size=(9, 4, 8)).astype(np.float32)
    ex = em.tensor(x, device=dev).require_grad()
    out, h = net(ex)
    grads = (out.sum() + h.sum() * 0.5).backward()
    tx = torch.tensor(x, device="cuda", requires_grad=True)
    tout, th = ref(tx)
    (tout.sum() + th.sum() * 0.5).backward()
    tol = {"rtol": 2e-5, "atol": 2e-5}
    np.testing.assert_allclose(out.to_numpy(), tout.detach().cpu().numpy(), **tol)
    np.testing.assert_allclose(h.to_numpy(), th.detach().cpu().numpy(), **tol)
    np.testing.assert_allclose(ex.grad(grads).to_numpy(), tx.grad.cpu().numpy(), **tol)
    for name, p in net.named_parameters():
        want = dict(ref.named_parameters())[name].grad.cpu().numpy()
        np.testing.assert_allclose(p.val().grad(grads).to_numpy(), want, **tol, err_msg=name)
