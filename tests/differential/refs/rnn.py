"""PyTorch references of the whole-sequence recurrent rows (``ember/ops/rnn.py``, ``gru.py``):
plain per-step loops in PyTorch's own formulas."""

from __future__ import annotations

from typing import Any

import torch


def _order(steps: int, reverse: bool) -> range:
    return range(steps - 1, -1, -1) if reverse else range(steps)


def _lstm_seq(xw: Any, w_hh: Any, h0: Any, c0: Any, reverse: bool) -> Any:
    steps = xw.shape[0]
    h, c = h0, c0
    hs: list[Any] = [None] * steps
    cs: list[Any] = [None] * steps
    for t in _order(steps, reverse):
        i, f, g, o = (xw[t] + h @ w_hh.T).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        hs[t], cs[t] = h, c
    return torch.cat([torch.stack(hs), torch.stack(cs)], 2)


def _gru_seq(xw: Any, w_hh: Any, b_hh: Any, h0: Any, reverse: bool) -> Any:
    hs: list[Any] = [None] * xw.shape[0]
    h = h0
    for t in _order(xw.shape[0], reverse):
        # torch.nn.functional's GRU cell through torch.gru_cell: b_hh (0-d: none) as PyTorch
        h = torch.gru_cell(xw[t], h, torch.eye(xw.shape[2], dtype=xw.dtype), w_hh, None,
                           b_hh if b_hh.ndim else None)  # fmt: skip
        hs[t] = h
    return torch.stack(hs)


def _rnn_seq(xw: Any, w_hh: Any, h0: Any, reverse: bool, nonlinearity: str) -> Any:
    act = torch.tanh if nonlinearity == "tanh" else torch.relu
    hs: list[Any] = [None] * xw.shape[0]
    h = h0
    for t in _order(xw.shape[0], reverse):
        h = act(xw[t] + h @ w_hh.T)
        hs[t] = h
    return torch.stack(hs)


REFS = {"lstm_seq": _lstm_seq, "gru_seq": _gru_seq, "rnn_seq": _rnn_seq}
