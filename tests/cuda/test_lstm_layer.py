"""cuDNN's whole-layer LSTM behind the ``lstm_layer`` row (torch backend, CUDA)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _inputs(rng: np.random.Generator, steps: int, batch: int, n_in: int, hid: int, bias: bool):
    n = rng.normal
    biases = [n(size=(4 * hid,)) * 0.3 for _ in range(2)] if bias else [np.zeros(())] * 2
    return [
        n(size=(steps, batch, n_in)), n(size=(4 * hid, n_in)) * 0.4, n(size=(4 * hid, hid)) * 0.4,
        *biases, n(size=(batch, hid)), n(size=(batch, hid)),
    ]  # fmt: skip


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_cudnn_equals_the_generic_row_in_float64(reverse: bool, bias: bool) -> None:
    from ember._core.dispatch import apply
    from ember.ops.registry import OPS

    vals = _inputs(np.random.default_rng(0), 7, 3, 5, 6, bias)
    gw = np.random.default_rng(1).normal(size=(8, 3, 6))
    results = []
    for dev in (em.Device.cuda(0).autodiff(), em.Device.torch("cpu").autodiff()):
        ts = [em.tensor(v, device=dev) for v in vals]
        ts = [t if t.ndim == 0 else t.require_grad() for t in ts]  # 0-d biases: none
        ptrs = [t._raw.data_ptr() for t in ts]
        out = apply(OPS["lstm_layer"], tuple(ts), {"reverse": reverse})
        grads = (out * em.tensor(gw, device=dev)).sum().backward()
        results.append([out.to_numpy(), *(t.grad(grads).to_numpy() for t in ts if t.ndim)])
        for t, v, p in zip(ts, vals, ptrs):  # packing cuDNN's weights left the inputs alone
            assert t._raw.data_ptr() == p
            np.testing.assert_array_equal(t.to_numpy(), v)
    assert em.Device.cuda(0).b.lstm_layer_takes(em.tensor(vals[0], device=em.Device.cuda(0))._raw)
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_lstm_layer_matches_torch_lstm() -> None:
    # nn.LSTM (2 layers, bidirectional) on CUDA through cuDNN, against torch.nn.LSTM with the
    # same state_dict, float32: forward and the gradients of input and every weight
    em.seed(0)
    dev = em.Device.cuda(0).autodiff()
    lstm = em.nn.LSTM(8, 16, num_layers=2, bidirectional=True, device=dev)
    ref = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True).cuda()
    ref.load_state_dict({k: torch.as_tensor(v.to_numpy()) for k, v in lstm.state_dict().items()})
    x = np.random.default_rng(2).normal(size=(9, 4, 8)).astype(np.float32)
    ex = em.tensor(x, device=dev).require_grad()
    out, (h, c) = lstm(ex)
    grads = (out.sum() + h.sum() * 0.5 + c.sum() * 0.25).backward()
    tx = torch.tensor(x, device="cuda", requires_grad=True)
    tout, (th, tc) = ref(tx)
    (tout.sum() + th.sum() * 0.5 + tc.sum() * 0.25).backward()
    tol = {"rtol": 2e-5, "atol": 2e-5}
    np.testing.assert_allclose(out.to_numpy(), tout.detach().cpu().numpy(), **tol)
    np.testing.assert_allclose(c.to_numpy(), tc.detach().cpu().numpy(), **tol)
    np.testing.assert_allclose(ex.grad(grads).to_numpy(), tx.grad.cpu().numpy(), **tol)
    for name, p in lstm.named_parameters():
        want = dict(ref.named_parameters())[name].grad.cpu().numpy()
        np.testing.assert_allclose(p.val().grad(grads).to_numpy(), want, **tol, err_msg=name)
