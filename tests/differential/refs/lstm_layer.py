"""PyTorch reference of the whole-layer LSTM row (``ember/ops/lstm_layer.py``): ``torch.nn.LSTM``'s
own functional kernel (``torch.lstm``) over the sequence, the final cell state appended."""

from __future__ import annotations

from typing import Any

import torch


def _lstm_layer(x: Any, w_ih: Any, w_hh: Any, bias: Any, h0: Any, c0: Any, reverse: bool) -> Any:
    xs = x.flip(0) if reverse else x
    weights = [w_ih, w_hh, bias, torch.zeros_like(bias)]
    out, _, cy = torch.lstm(xs, (h0[None], c0[None]), weights, True, 1, 0.0, False, False, False)
    return torch.cat([out.flip(0) if reverse else out, cy], 0)


REFS = {"lstm_layer": _lstm_layer}
