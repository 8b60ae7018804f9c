"""The whole-sequence LSTM and Elman RNN rows: one call per layer and direction.

``lstm_seq(xw, w_hh, h0, c0, reverse)``: ``xw`` ``(T, B, 4H)`` is ``x W_ih^T + b_ih + b_hh``
for every step, ``w_hh`` ``(4H, H)`` (gates ``i, f, g, o`` as PyTorch stacks them), ``h0`` /
``c0`` ``(B, H)``. The output ``(T, B, 2H)`` holds each step's ``[h_t | c_t]``.

``rnn_seq(xw, w_hh, h0, reverse, nonlinearity)``: ``xw`` ``(T, B, H)`` is ``x W_ih^T + b_ih +
b_hh``, ``h_t = act(xw_t + h_{t-1} W_hh^T)`` with ``act`` ``"tanh"`` or ``"relu"``; the output
``(T, B, H)`` holds every ``h_t``.

Both save nothing but their inputs and output (``ember/ops/recurrent.py`` has the shared scan
and backward recurrence). The LSTM backward recomputes all pre-activations in one GEMM from the
previous hidden states read off the output; the Elman row's activation derivative is a function
of its output alone (``1 - h^2``, or ``h > 0``), so it recomputes nothing.
"""

from __future__ import annotations

from typing import Any

from ..errors import ShapeError
from .recurrent import (
    ALL,
    State,
    flat_matmul,
    previous,
    scan,
    seq_examples,
    seq_flops,
    transposed,
    unscan,
    weight_grad,
)
from .registry import Cost, Domain, Examples, Grads, Saves, defop


def _lstm_cell(b: Any, xw_t: Any, hw_t: Any, state: State) -> State:
    c = state[1]
    hid = c.shape[-1]
    z = xw_t + hw_t  # (B, 4H)
    s = b.sigmoid(z)
    gi, gf, gg, go = ((ALL, slice(k * hid, (k + 1) * hid)) for k in range(4))
    c = b.index(s, gf) * c + b.index(s, gi) * b.tanh(b.index(z, gg))
    return b.index(s, go) * b.tanh(c), c


def _lstm_seq_forward(b: Any, xw: Any, w_hh: Any, h0: Any, c0: Any, reverse: bool) -> Any:
    """``(T, B, 2H)``: ``[h_t | c_t]`` of every step."""
    return b.cat(scan(b, xw, w_hh, (h0, c0), _lstm_cell, reverse), 2)


@defop(
    "lstm_seq",
    arity=4,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.OUTPUT,
    dtypes=Domain.FLOAT,
    forward=_lstm_seq_forward,
    examples=lambda rng: seq_examples(rng, 4, 2, [{"reverse": False}, {"reverse": True}]),
    flops=seq_flops(4),
)
def lstm_seq_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    xw, w_hh, h0, c0 = ctx.inputs
    reverse = ctx.attrs["reverse"]
    hid = xw.shape[2] // 4
    lo, hi = (ALL, ALL, slice(0, hid)), (ALL, ALL, slice(hid, 2 * hid))
    hs, cs = b.index(ctx.output, lo), b.index(ctx.output, hi)
    hp, cp = previous(b, hs, h0, reverse), previous(b, cs, c0, reverse)
    z = xw + flat_matmul(b, hp, transposed(b, w_hh))  # (T, B, 4H): all pre-activations
    s = b.sigmoid(z)
    gi, gf, go = (b.index(s, (ALL, ALL, slice(k * hid, (k + 1) * hid))) for k in (0, 1, 3))
    gg = b.tanh(b.index(z, (ALL, ALL, slice(2 * hid, 3 * hid))))
    tc = b.tanh(cs)
    dc_dh = go * (1 - tc * tc)  # dc_t / dh_t through h_t = o tanh(c_t)
    # dz_t = [dc, dc, dc, dh] * fac_t: the gate derivatives, every step at once
    fac = b.cat([gg * gi * (1 - gi), cp * gf * (1 - gf), gi * (1 - gg * gg), tc * go * (1 - go)], 2)
    gc = b.index(grad, hi)

    def step(t: int, dh: Any, dc_next: Any) -> tuple[Any, Any, Any]:
        dc = b.index(gc, (t,)) + dh * b.index(dc_dh, (t,))
        if dc_next is not None:
            dc = dc + dc_next
        dz = b.cat([dc, dc, dc, dh], 1) * b.index(fac, (t,))  # (B, 4H)
        return dz, None, dc * b.index(gf, (t,))

    dz, _, dh0, dc0 = unscan(b, b.index(grad, lo), w_hh, step, reverse)
    dw = weight_grad(b, dz, hp) if ctx.parents[1] is not None else None
    return dz, dw, dh0, dc0


_ACTIVATIONS = ("tanh", "relu")


def _rnn_seq_forward(b: Any, xw: Any, w_hh: Any, h0: Any, reverse: bool, nonlinearity: str) -> Any:
    """``(T, B, H)``: ``h_t`` of every step."""
    if nonlinearity not in _ACTIVATIONS:
        raise ShapeError(
            f"rnn_seq: expected nonlinearity 'tanh' or 'relu', got {nonlinearity!r}. Hint: "
            "other activations need a custom cell (nn.RNNCell's loop)."
        )
    act = b.tanh if nonlinearity == "tanh" else b.relu

    def cell(b: Any, xw_t: Any, hw_t: Any, state: State) -> State:
        return (act(xw_t + hw_t),)

    return scan(b, xw, w_hh, (h0,), cell, reverse)[0]


def _rnn_examples(rng: Any) -> Examples:
    acts = [{"reverse": r, "nonlinearity": a} for a in _ACTIVATIONS for r in (False, True)]
    return seq_examples(rng, 1, 1, acts)


@defop(
    "rnn_seq",
    arity=3,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.OUTPUT,
    dtypes=Domain.FLOAT,
    forward=_rnn_seq_forward,
    examples=_rnn_examples,
    smooth=False,  # relu's kink
    flops=seq_flops(1),
)
def rnn_seq_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    _, w_hh, h0 = ctx.inputs
    hs = ctx.output
    if ctx.attrs["nonlinearity"] == "tanh":
        fac = 1 - hs * hs
    else:
        fac = b.relu_backward(b.ones_like(hs), hs)  # 1 where h > 0

    def step(t: int, dh: Any, carry: Any) -> tuple[Any, Any, Any]:
        return dh * b.index(fac, (t,)), None, None

    dz, _, dh0, _ = unscan(b, grad, w_hh, step, ctx.attrs["reverse"])
    dw = None
    if ctx.parents[1] is not None:
        dw = weight_grad(b, dz, previous(b, hs, h0, ctx.attrs["reverse"]))
    return dz, dw, dh0
