"""PyTorch reference of the whole-sequence LSTM row (``ember/ops/rnn.py``)."""

from __future__ import annotations

from typing import Any

import torch


def _lstm_seq(xw: Any, w_hh: Any, h0: Any, c0: Any, reverse: bool) -> Any:
    steps = xw.shape[0]
    h, c = h0, c0
    hs: list[Any] = [None] * steps
    cs: list[Any] = [None] * steps
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        i, f, g, o = (xw[t] + h @ w_hh.T).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        hs[t], cs[t] = h, c
    return torch.cat([torch.stack(hs), torch.stack(cs)], 2)


REFS = {"lstm_seq": _lstm_seq}
