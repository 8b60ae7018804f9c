"""Recurrent layers and cells against PyTorch in float64: outputs, final states and every gradient
(inputs, initial states, parameters), with PyTorch state dicts loaded unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.errors import ShapeError

F64 = {"dtype": em.float64}
T = torch.nn
ATOL = 1e-10  # float64, a few dozen dependent steps


def _load(m: nn.Module, tm: torch.nn.Module) -> None:
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def _flat(y: Any) -> list[Any]:
    if isinstance(y, (tuple, list)):
        return [v for item in y for v in _flat(item)]
    return [y]


def _compare(
    m: nn.Module,
    tm: torch.nn.Module,
    inputs: list[np.ndarray],
    device: em.Device,
    call: Callable[[Any, list[Any]], Any] = lambda mod, xs: mod(*xs),
) -> None:
    """Forward and backward of ``loss = sum_k (y_k * w_k).sum()`` in both, every gradient equal."""
    rng = np.random.default_rng(7)
    dev = device.autodiff()
    m = m.fork(dev)
    xs = [em.Tensor.from_data(a, device=dev).require_grad() for a in inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    ys, tys = _flat(call(m, xs)), _flat(call(tm, ts))
    assert len(ys) == len(tys)
    ws = [rng.normal(size=tuple(ty.shape)) for ty in tys]
    loss = sum(((y * em.Tensor.from_data(w, device=device)).sum() for y, w in zip(ys, ws)))
    tloss = sum(((ty * torch.tensor(w)).sum() for ty, w in zip(tys, ws)))
    for y, ty in zip(ys, tys):
        np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), atol=ATOL)
    grads = loss.backward()  # type: ignore[union-attr]
    tloss.backward()  # type: ignore[union-attr]
    for i, (x, t) in enumerate(zip(xs, ts)):
        np.testing.assert_allclose(x.grad(grads).to_numpy(), t.grad.numpy(), atol=ATOL, err_msg=i)
    tparams = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        np.testing.assert_allclose(
            p.val().grad(grads).to_numpy(), tparams[name].grad.numpy(), atol=ATOL, err_msg=name
        )


def _seq(rng: np.random.Generator, steps: int, batch: int, size: int, bf: bool) -> np.ndarray:
    return rng.normal(size=(batch, steps, size) if bf else (steps, batch, size))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_with_initial_state(device: em.Device, batch_first: bool, bidirectional: bool) -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    kw = {"batch_first": batch_first, "bidirectional": bidirectional}
    tm = T.LSTM(3, 4, 2, **kw).double()
    m = nn.LSTM(3, 4, 2, **kw, **F64)
    _load(m, tm)
    d = 2 if bidirectional else 1
    x = _seq(rng, 5, 2, 3, batch_first)
    h0, c0 = rng.normal(size=(2 * d, 2, 4)), rng.normal(size=(2 * d, 2, 4))
    _compare(m, tm, [x, h0, c0], device, lambda mod, xs: mod(xs[0], (xs[1], xs[2])))


def test_rnn_relu_and_tanh(device: em.Device) -> None:
    for nonlinearity, bidirectional in (("tanh", False), ("relu", True)):
        torch.manual_seed(1)
        rng = np.random.default_rng(1)
        tm = T.RNN(3, 4, 2, nonlinearity, batch_first=True, bidirectional=bidirectional).double()
        m = nn.RNN(3, 4, 2, nonlinearity, batch_first=True, bidirectional=bidirectional, **F64)
        assert sorted(n for n, _ in m.named_parameters()) == sorted(tm.state_dict())
        _load(m, tm)
        d = 2 if bidirectional else 1
        x, h0 = _seq(rng, 6, 3, 3, True), rng.normal(size=(2 * d, 3, 4))
        _compare(m, tm, [x, h0], device)


def test_gru_initial_state(device: em.Device) -> None:
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    tm, m = T.GRU(3, 4, 2).double(), nn.GRU(3, 4, 2, **F64)
    _load(m, tm)
    _compare(m, tm, [_seq(rng, 4, 2, 3, False), rng.normal(size=(2, 2, 4))], device)


CELLS = [
    ("lstm", lambda: nn.LSTMCell(3, 5, **F64), lambda: T.LSTMCell(3, 5), 2),
    ("lstm_nobias", lambda: nn.LSTMCell(3, 5, False, **F64), lambda: T.LSTMCell(3, 5, False), 2),
    ("gru", lambda: nn.GRUCell(3, 5, **F64), lambda: T.GRUCell(3, 5), 1),
    ("rnn_tanh", lambda: nn.RNNCell(3, 5, **F64), lambda: T.RNNCell(3, 5), 1),
    ("rnn_relu", lambda: nn.RNNCell(3, 5, nonlinearity="relu", **F64),
     lambda: T.RNNCell(3, 5, nonlinearity="relu"), 1),
]  # fmt: skip


@pytest.mark.parametrize("name,make,make_torch,states", CELLS, ids=[c[0] for c in CELLS])
@pytest.mark.parametrize("unbatched", [False, True])
def test_cells_over_three_steps(
    device: em.Device,
    name: str,
    make: Callable[[], nn.Module],
    make_torch: Callable[[], torch.nn.Module],
    states: int,
    unbatched: bool,
) -> None:
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    tm = make_torch().double()
    m = make()
    assert sorted(n for n, _ in m.named_parameters()) == sorted(tm.state_dict())
    _load(m, tm)
    lead = () if unbatched else (4,)
    xs = [rng.normal(size=(*lead, 3)) for _ in range(3)]
    init = [rng.normal(size=(*lead, 5)) for _ in range(states)]

    def unroll(mod: Any, ts: list[Any]) -> Any:
        state = ts[3] if states == 1 else (ts[3], ts[4])
        outs = []
        for x in ts[:3]:
            state = mod(x, state)
            outs.append(state)
        return outs

    _compare(m, tm, xs + init, device, unroll)


def test_cell_without_state_starts_at_zeros(device: em.Device) -> None:
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    tm, m = T.LSTMCell(3, 2).double(), nn.LSTMCell(3, 2, **F64)
    _load(m, tm)
    _compare(m, tm, [rng.normal(size=(2, 3))], device)


def test_lstm_dropout_between_layers_only_in_training(device: em.Device) -> None:
    rng = np.random.default_rng(5)
    m = nn.LSTM(3, 4, 3, dropout=0.5, **F64).fork(device)
    x = em.Tensor.from_data(rng.normal(size=(5, 2, 3)), device=device)
    em.seed(0)
    a = m(x)[0].to_numpy()
    em.seed(1)
    b = m(x)[0].to_numpy()
    assert not np.allclose(a, b)  # each training call draws its own masks
    one = nn.LSTM(3, 4, 1, dropout=0.5, **F64).fork(device)  # one layer: nothing between layers
    np.testing.assert_array_equal(one(x)[0].to_numpy(), one(x)[0].to_numpy())
    m.valid()
    np.testing.assert_array_equal(m(x)[0].to_numpy(), m(x)[0].to_numpy())
    tm = T.LSTM(3, 4, 3, dropout=0.5).double().eval()
    ref = nn.LSTM(3, 4, 3, dropout=0.5, **F64)
    _load(ref, tm)
    ref = ref.fork(device)
    ref.valid()
    np.testing.assert_allclose(
        ref(x)[0].to_numpy(), tm(torch.tensor(x.to_numpy()))[0].detach().numpy(), atol=ATOL
    )


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ShapeError, match="dropout"):
        nn.LSTM(3, 4, 2, dropout=1.0)
    with pytest.raises(ShapeError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ShapeError, match="LSTMCell: expected an input"):
        nn.LSTMCell(3, 4)(em.Tensor.ones((2, 5)))
    with pytest.raises(ShapeError, match="expected initial states of shape"):
        nn.LSTM(3, 4, 2)(em.Tensor.ones((5, 2, 3)), (em.Tensor.ones((1, 2, 4)),) * 2)
    with pytest.raises(ShapeError, match="expected h of shape"):
        nn.GRUCell(3, 4)(em.Tensor.ones((2, 3)), em.Tensor.ones((3, 4)))
