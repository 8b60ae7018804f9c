"""A whole LSTM layer through cuDNN (``aten::_cudnn_rnn`` and its backward), for CUDA.

One call runs the input projection and the recurrence of every step forward; one call gives
the gradients of the input, the weights and the initial state. These are ATen kernels called
directly, not torch's autograd: the ``lstm_layer`` row (ember/ops/lstm_layer.py) keeps cuDNN's
reserve space and packed weights as its residuals. A reversed direction runs on the
time-flipped sequence. ember's weights are values, never views of one flat buffer, so each
forward packs them into cuDNN's layout (``_cudnn_rnn_flatten_weight`` over detached aliases: the
aliases are re-pointed into the buffer, ember's tensors are left alone); the backward reads the
same buffer.
"""

from __future__ import annotations

from typing import Any

import torch

_LSTM_MODE = 2  # cuDNN's RNN modes: 0 relu, 1 tanh, 2 LSTM, 3 GRU
_DTYPES = (torch.float32, torch.float16, torch.float64)


def takes(x: torch.Tensor) -> bool:
    """CUDA with cuDNN, a dtype cuDNN's RNN runs, a non-empty sequence."""
    return (
        x.is_cuda
        and x.dtype in _DTYPES
        and x.ndim == 3
        and x.shape[0] > 0
        and x.shape[1] > 0
        and bool(torch.backends.cudnn.is_available())
        and bool(torch.backends.cudnn.enabled)
    )


def _weights(
    w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor
) -> list[torch.Tensor]:
    ws = [w_ih, w_hh, b_ih, b_hh] if b_ih.ndim else [w_ih, w_hh]
    return [w.contiguous() for w in ws]


def forward(
    x: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    reverse: bool,
) -> tuple[torch.Tensor, tuple[Any, ...]]:
    """``(T + 1, B, H)``: every ``h_t`` in time order, then the final cell state; and the
    residuals the backward reads: cuDNN's reserve space, the packed weights and their views,
    and a view of the ``h_t`` rows of the output (no copy). 0-d biases: none."""
    hid = h0.shape[-1]
    xs = (x.flip(0) if reverse else x).contiguous()
    ws = [w.detach() for w in _weights(w_ih, w_hh, b_ih, b_hh)]  # re-pointed into `packed`
    packed = torch._cudnn_rnn_flatten_weight(
        ws, len(ws), x.shape[2], _LSTM_MODE, hid, 0, 1, False, False
    )
    out, _, cy, reserve, _ = torch.ops.aten._cudnn_rnn(
        xs, ws, len(ws), packed, h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous(),
        _LSTM_MODE, hid, 0, 1, False, 0.0, True, False, [], None,
    )  # fmt: skip
    result = torch.cat([out.flip(0) if reverse else out, cy], 0)
    return result, (reserve, packed, ws, result[: x.shape[0]])


def backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    saved: tuple[Any, ...],
    reverse: bool,
) -> tuple[torch.Tensor | None, ...]:
    """Gradients of ``(x, w_ih, w_hh, b_ih, b_hh, h0, c0)`` given the row's output gradient
    ``(T + 1, B, H)`` (``None`` for absent biases)."""
    reserve, packed, ws, hs = saved
    steps, hid = x.shape[0], h0.shape[-1]

    def seq(t: torch.Tensor) -> torch.Tensor:  # in the order cuDNN ran the steps
        return (t.flip(0) if reverse else t).contiguous()

    dx, dhx, dcx, dws = torch.ops.aten._cudnn_rnn_backward(
        seq(x), ws, len(ws), packed, h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous(),
        seq(hs), seq(grad[:steps]), None, grad[steps:].contiguous(), _LSTM_MODE, hid, 0, 1,
        False, 0.0, True, False, [], None, reserve, [True, True, True, True],
    )  # fmt: skip
    dx = dx.flip(0) if reverse else dx
    db_ih, db_hh = (dws[2], dws[3]) if b_ih.ndim else (None, None)
    return dx, dws[0], dws[1], db_ih, db_hh, dhx[0], dcx[0]
