"""PyTorch reference of the whole-layer GRU / Elman row (``ember/ops/recurrent_layer.py``):
``torch.nn.GRU`` / ``torch.nn.RNN``'s own functional kernels (``torch.gru``, ``torch.rnn_tanh``,
``torch.rnn_relu``) over the sequence."""

from __future__ import annotations

from typing import Any

import torch

_KERNELS = {"gru": torch.gru, "rnn_tanh": torch.rnn_tanh, "rnn_relu": torch.rnn_relu}


def _recurrent_layer(
    x: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, h0: Any, mode: str, reverse: bool
) -> Any:
    xs = x.flip(0) if reverse else x
    biased = b_ih.ndim > 0
    weights = [w_ih, w_hh, b_ih, b_hh] if biased else [w_ih, w_hh]
    out, _ = _KERNELS[mode](xs, h0[None], weights, biased, 1, 0.0, False, False, False)
    return out.flip(0) if reverse else out


REFS = {"recurrent_layer": _recurrent_layer}
