"""A whole recurrent layer through cuDNN (``aten::_cudnn_rnn`` and its backward), for CUDA.

One call runs the input projection and the recurrence of every step forward; one call gives
the gradients of the input, the weights and the initial state(s). The cell is cuDNN's mode:
``rnn_relu`` (0), ``rnn_tanh`` (1), ``lstm`` (2), ``gru`` (3); cuDNN's GRU is PyTorch's (gates
``r, z, n``, ``b_hn`` inside the reset gate), so ember's PyTorch-layout weights go as they are,
as torch's own ``nn.GRU`` hands them over. These are ATen kernels called directly, not torch's
autograd: the ``lstm_layer`` and ``recurrent_layer`` rows (ember/ops/) keep cuDNN's reserve space
and packed weights as their residuals. A reversed direction runs on the time-flipped sequence.
ember's weights are values, never views of one flat buffer, so each forward packs them into
cuDNN's layout (``_cudnn_rnn_flatten_weight`` over detached aliases: the aliases are re-pointed
into the buffer, ember's tensors are left alone); the backward reads the same buffer.
"""

from __future__ import annotations

from typing import Any

import torch

MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}  # cuDNN's RNN modes
_DTYPES = (torch.float32, torch.float16, torch.float64)


# modes whose path passed tests/cuda/ on an H200 (test_lstm_layer.py, test_rnn_layer.py; figures
# in bench/RESULTS.md); a new mode stays on its generic *_seq row on CUDA until it has
DEVICE_VERIFIED = frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu"})


def takes_mode(x: torch.Tensor, mode: str) -> bool:
    """``takes(x)`` for a cell whose cuDNN path was verified on a device."""
    return mode in DEVICE_VERIFIED and takes(x)


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


def _state(s: torch.Tensor | None) -> torch.Tensor | None:
    return None if s is None else s.unsqueeze(0).contiguous()


def forward(
    x: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor | None,
    mode: str,
    reverse: bool,
) -> tuple[torch.Tensor, tuple[Any, ...]]:
    """``(T, B, H)``: every ``h_t`` in time order (the final ``h`` is row ``T - 1``, or row 0
    when ``reverse``), then for an LSTM (``c0`` given) one more row, the final cell state; and
    the residuals the backward reads: cuDNN's reserve space, the packed weights and their
    views, and a view of the ``h_t`` rows of the output (no copy). 0-d biases: none."""
    hid, code = h0.shape[-1], MODES[mode]
    xs = (x.flip(0) if reverse else x).contiguous()
    ws = [w.detach() for w in _weights(w_ih, w_hh, b_ih, b_hh)]  # re-pointed into `packed`
    packed = torch._cudnn_rnn_flatten_weight(ws, len(ws), x.shape[2], code, hid, 0, 1, False, False)
    out, _, cy, reserve, _ = torch.ops.aten._cudnn_rnn(
        xs, ws, len(ws), packed, _state(h0), _state(c0), code, hid, 0, 1, False, 0.0, True,
        False, [], None,
    )  # fmt: skip
    hs = out.flip(0) if reverse else out
    result = hs if c0 is None else torch.cat([hs, cy], 0)
    return result, (reserve, packed, ws, result[: x.shape[0]])


def backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor | None,
    saved: tuple[Any, ...],
    mode: str,
    reverse: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
    """``(dx, dh0, dc0, dws)`` given the output gradient (``(T + 1, B, H)`` for an LSTM, its
    last row the final cell state's; ``(T, B, H)`` otherwise); ``dws`` as ``forward`` packed
    the weights (``w_ih, w_hh`` and, with biases, ``b_ih, b_hh``); ``dc0`` None without ``c0``."""
    reserve, packed, ws, hs = saved
    steps, hid, code = x.shape[0], h0.shape[-1], MODES[mode]

    def seq(t: torch.Tensor) -> torch.Tensor:  # in the order cuDNN ran the steps
        return (t.flip(0) if reverse else t).contiguous()

    gcy = None if c0 is None else grad[steps:].contiguous()
    dx, dhx, dcx, dws = torch.ops.aten._cudnn_rnn_backward(
        seq(x), ws, len(ws), packed, _state(h0), _state(c0), seq(hs), seq(grad[:steps]), None,
        gcy, code, hid, 0, 1, False, 0.0, True, False, [], None, reserve,
        [True, True, c0 is not None, True],
    )  # fmt: skip
    dx = dx.flip(0) if reverse else dx
    return dx, dhx[0], None if c0 is None else dcx[0], list(dws)


def lstm_backward(
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
    """Gradients of ``lstm_layer``'s ``(x, w_ih, w_hh, b_ih, b_hh, h0, c0)`` (``None`` for
    absent biases)."""
    dx, dh0, dc0, dws = backward(grad, x, h0, c0, saved, "lstm", reverse)
    db_ih, db_hh = (dws[2], dws[3]) if b_ih.ndim else (None, None)
    return dx, dws[0], dws[1], db_ih, db_hh, dh0, dc0


def layer_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
    h0: torch.Tensor,
    saved: tuple[Any, ...],
    mode: str,
    reverse: bool,
) -> tuple[torch.Tensor | None, ...]:
    """Gradients of ``recurrent_layer``'s ``(x, w_ih, w_hh, b_ih, b_hh, h0)`` (a GRU or Elman
    layer; ``None`` for absent biases)."""
    dx, dh0, _, dws = backward(grad, x, h0, None, saved, mode, reverse)
    db_ih, db_hh = (dws[2], dws[3]) if b_ih.ndim else (None, None)
    return dx, dws[0], dws[1], db_ih, db_hh, dh0
