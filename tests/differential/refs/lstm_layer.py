"""PyTorch reference of the whole-layer LSTM row (``ember/ops/lstm_layer.py``): ``torch.nn.LSTM``'s
own functional kernel (``torch.lstm``) over the sequence, the final cell state appended."""

from __future__ import annotations

from typing import Any

import torch


def _lstm_layer(
    x: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, h0: Any, c0: Any, reverse: bool
) -> Any:
    xs = x.flip(0) if reverse else x
    biased = b_ih.ndim > 0
    weights = [w_ih, w_hh, b_ih, b_hh] if biased else [w_ih, w_hh]
    out, _, cy = torch.lstm(xs, (h0[None], c0[None]), weights, biased, 1, 0.0, False, False, False)
    return torch.cat([out.flip(0) if reverse else out, cy], 0)


REFS = {"lstm_layer": _lstm_layer}
