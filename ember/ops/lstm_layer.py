"""The whole-layer LSTM row: input projection and recurrence of one layer and direction.

``lstm_layer(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse)``: ``x`` ``(T, B, I)``, ``w_ih``
``(4H, I)``, ``w_hh`` ``(4H, H)`` (gates ``i, f, g, o`` as PyTorch stacks them), ``b_ih`` /
``b_hh`` ``(4H,)`` (both 0-d: no bias), ``h0`` / ``c0`` ``(B, H)``. The output
``(T + 1, B, H)`` holds each step's ``h_t`` in input time order and, as its last row, the final
cell state (``c`` after the last step the recurrence ran: step ``T - 1``, or step 0 when
``reverse``).

It exists for backends whose library runs a whole LSTM layer in one call forward and one
backward: the torch backend on CUDA takes cuDNN's (``Backend.lstm_layer_fused``), whose residuals
(its reserve space and packed weights) its backward reads. ``nn.LSTM`` uses this row where the
backend has such a kernel (``Backend.lstm_layer_takes``) and ``lstm_seq`` elsewhere. On other
backends the row is the input GEMM and ``lstm_seq``'s recurrence, its residual the ``[h | c]``
sequence, and its backward ``lstm_seq``'s with the GEMM's gradients.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, defop
from .rnn import _lstm_seq_forward, lstm_seq_backward

_ALL = slice(None)


def _projection(b: Any, x: Any, w_ih: Any, b_ih: Any, b_hh: Any) -> Any:
    """``(T, B, 4H)``: ``x W_ih^T + b_ih + b_hh`` for every step, one GEMM."""
    steps, batch, n_in = x.shape
    flat = b.matmul(b.reshape(x, (steps * batch, n_in)), b.permute(w_ih, (1, 0)))
    xw = b.reshape(flat, (steps, batch, w_ih.shape[0]))
    return xw + (b_ih + b_hh) if b_ih.ndim else xw


def _final_cell(b: Any, seq: Any, reverse: bool) -> Any:
    """``(1, B, H)``: the cell state after the recurrence's last step."""
    steps, hid = seq.shape[0], seq.shape[2] // 2
    last = 0 if reverse else steps - 1
    return b.index(seq, (slice(last, last + 1), _ALL, slice(hid, 2 * hid)))


def _lstm_layer_forward(
    b: Any, x: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, h0: Any, c0: Any, reverse: bool
) -> tuple[Any, Any]:
    """``(out, saved)``: the ``(T + 1, B, H)`` output and what the backward reads."""
    fused = b.lstm_layer_fused(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse)
    if fused is not None:
        return fused
    xw = _projection(b, x, w_ih, b_ih, b_hh)
    seq = _lstm_seq_forward(b, xw, w_hh, h0, c0, reverse)  # (T, B, 2H): [h_t | c_t]
    hid = h0.shape[-1]
    out = b.cat([b.index(seq, (_ALL, _ALL, slice(0, hid))), _final_cell(b, seq, reverse)], 0)
    return out, seq


class _SeqContext:
    """What ``lstm_seq``'s rule reads of its context, for the recurrence inside this row."""

    __slots__ = ("attrs", "b", "inputs", "output", "parents")

    def __init__(self, b: Any, xw: Any, w_hh: Any, h0: Any, c0: Any, seq: Any, rev: bool) -> None:
        self.b = b
        self.inputs = (xw, w_hh, h0, c0)
        self.output = seq
        self.attrs = {"reverse": rev}
        self.parents = (True, True, True, True)  # every gradient is wanted


def _examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        (
            (n(size=(3, 2, 5)), n(size=(8, 5)) * 0.5, n(size=(8, 2)) * 0.7, n(size=(8,)) * 0.3)
            + (n(size=(8,)) * 0.3, n(size=(2, 2)), n(size=(2, 2))),
            {"reverse": r},
        )
        for r in (False, True)
    ]  # (no-bias 0-d placeholders are constants: tests/unit/nn/test_lstm_layer_path.py)


def _flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
    (steps, batch, n_in), (g4, _) = shapes[0], shapes[1]
    return float(steps * batch * g4 * (n_in + g4 // 4 + 6))


@defop(
    "lstm_layer",
    arity=7,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.RESIDUALS,
    dtypes=Domain.FLOAT,
    forward=_lstm_layer_forward,
    examples=_examples,
    flops=_flops,
)
def lstm_layer_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    x, w_ih, w_hh, b_ih, b_hh, h0, c0 = ctx.inputs
    reverse = ctx.attrs["reverse"]
    if isinstance(ctx.saved, tuple):  # a fused kernel's own residuals: its own backward
        return b.lstm_layer_fused_backward(
            grad, x, w_ih, w_hh, b_ih, b_hh, h0, c0, ctx.saved, reverse
        )
    seq = ctx.saved
    steps, batch, n_in = x.shape
    hid = h0.shape[-1]
    # the row's gradient as lstm_seq's: h_t's in order, the final cell state's at its step
    gh = b.index(grad, (slice(0, steps),))
    gc_last = b.index(grad, (slice(steps, steps + 1),))
    zeros = b.zeros_like(b.index(gh, (slice(0, steps - 1),)))
    gc = b.cat([gc_last, zeros] if reverse else [zeros, gc_last], 0)
    xw = _projection(b, x, w_ih, b_ih, b_hh)
    dxw, dw_hh, dh0, dc0 = lstm_seq_backward(
        _SeqContext(b, xw, w_hh, h0, c0, seq, reverse), b.cat([gh, gc], 2)
    )
    flat = b.reshape(dxw, (steps * batch, 4 * hid))
    dx = b.reshape(b.matmul(flat, w_ih), (steps, batch, n_in))
    dw_ih = b.matmul(b.permute(flat, (1, 0)), b.reshape(x, (steps * batch, n_in)))
    dbias = b.sum_dim(flat, 0) if b_ih.ndim else None
    return dx, dw_ih, dw_hh, dbias, dbias, dh0, dc0
