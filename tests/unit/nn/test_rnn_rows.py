"""nn.GRU and nn.RNN on their whole-sequence rows (gru_seq, rnn_seq) against PyTorch in float64:
every combination of bias, direction and layout, with initial states, outputs, final states and
every gradient (inputs, states, parameters) from PyTorch state dicts loaded unchanged."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.nn.layers import rnn as rnn_layers

from .test_rnn_cells import ATOL, F64, T, _compare, _load, _seq

FLAGS = list(itertools.product([True, False], [False, True], [False, True]))
IDS = [f"bias{int(b)}-bi{int(d)}-bf{int(f)}" for b, d, f in FLAGS]


@pytest.mark.parametrize("bias,bidirectional,batch_first", FLAGS, ids=IDS)
def test_gru_matches_torch(
    device: em.Device, bias: bool, bidirectional: bool, batch_first: bool
) -> None:
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    kw = {"bias": bias, "batch_first": batch_first, "bidirectional": bidirectional}
    tm, m = T.GRU(3, 4, 2, **kw).double(), nn.GRU(3, 4, 2, **kw, **F64)
    assert sorted(n for n, _ in m.named_parameters()) == sorted(tm.state_dict())
    _load(m, tm)
    d = 2 if bidirectional else 1
    x, h0 = _seq(rng, 7, 3, 3, batch_first), rng.normal(size=(2 * d, 3, 4))
    _compare(m, tm, [x, h0], device)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("bias,bidirectional,batch_first", FLAGS, ids=IDS)
def test_rnn_matches_torch(
    device: em.Device, nonlinearity: str, bias: bool, bidirectional: bool, batch_first: bool
) -> None:
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    kw = {"bias": bias, "batch_first": batch_first, "bidirectional": bidirectional}
    tm = T.RNN(3, 4, 2, nonlinearity, **kw).double()
    m = nn.RNN(3, 4, 2, nonlinearity, **kw, **F64)
    _load(m, tm)
    d = 2 if bidirectional else 1
    x, h0 = _seq(rng, 7, 3, 3, batch_first), rng.normal(size=(2 * d, 3, 4))
    _compare(m, tm, [x, h0], device)


def test_gru_b_hn_is_scaled_by_the_reset_gate(device: em.Device) -> None:
    # only b_hn set: PyTorch puts it inside r * (W_hn h + b_hn); folding it into the input
    # projection (the LSTM/RNN layout) would give another output
    torch.manual_seed(12)
    tm = T.GRU(2, 3, 1).double()
    with torch.no_grad():
        for p in tm.parameters():
            p.zero_()
        tm.bias_hh_l0[6:] = torch.tensor([0.5, -1.0, 2.0])
        tm.weight_ih_l0[:3] = 3.0  # r = sigmoid(3 * sum(x)), far from 1 for these inputs
    m = nn.GRU(2, 3, 1, **F64)
    _load(m, tm)
    x = np.full((2, 1, 2), -0.4)
    _compare(m, tm, [x], device)
    got = m.fork(device)(em.Tensor.from_data(x, device=device))[0].to_numpy()
    folded = np.tanh(np.array([0.5, -1.0, 2.0]))  # n at step 0 if b_hn skipped r, and z = 1/2
    assert not np.allclose(got[0, 0], 0.5 * folded, atol=1e-3)


@pytest.mark.parametrize("layer", ["gru", "rnn"])
def test_dropout_between_layers(device: em.Device, layer: str) -> None:
    rng = np.random.default_rng(13)
    make_t, make = (T.GRU, nn.GRU) if layer == "gru" else (T.RNN, nn.RNN)
    m = make(3, 4, 3, dropout=0.5, **F64).fork(device)
    x = em.Tensor.from_data(rng.normal(size=(5, 2, 3)), device=device)
    em.seed(0)
    a = m(x)[0].to_numpy()
    em.seed(1)
    assert not np.allclose(a, m(x)[0].to_numpy())  # training draws a mask per call
    torch.manual_seed(13)
    tm = make_t(3, 4, 3, dropout=0.5).double().eval()
    ref = make(3, 4, 3, dropout=0.5, **F64)
    _load(ref, tm)
    ref = ref.fork(device)
    ref.valid()
    np.testing.assert_allclose(
        ref(x)[0].to_numpy(), tm(torch.tensor(x.to_numpy()))[0].detach().numpy(), atol=ATOL
    )


@pytest.mark.parametrize("layer,row", [("GRU", "gru_seq"), ("RNN", "rnn_seq")])
def test_layers_run_one_row_per_layer_and_direction(
    device: em.Device, monkeypatch: pytest.MonkeyPatch, layer: str, row: str
) -> None:
    calls: list[str] = []
    real = rnn_layers.apply

    def counting(s, xs, attrs):  # type: ignore[no-untyped-def]
        calls.append(s.name)
        return real(s, xs, attrs)

    monkeypatch.setattr(rnn_layers, "apply", counting)
    m = getattr(nn, layer)(3, 4, 2, bidirectional=True, **F64).fork(device)
    x = em.Tensor.ones((9, 2, 3), device=device, dtype=em.float64)
    mode = "gru" if layer == "GRU" else "rnn_tanh"
    if device.b.recurrent_layer_takes(device.b.from_numpy(x.to_numpy(), em.float64), mode):
        row = "recurrent_layer"  # a backend's whole-layer kernel (cuDNN): still one call each
    out, h = m(x)
    assert calls == [row] * 4  # 2 layers x 2 directions, not 9 steps each
    assert out.shape == (9, 2, 8) and h.shape == (4, 2, 4)
