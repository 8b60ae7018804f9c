"""The whole-layer GRU / Elman row: input projection and recurrence of one layer and direction.

``recurrent_layer(x, w_ih, w_hh, b_ih, b_hh, h0, mode, reverse)``: ``x`` ``(T, B, I)``,
``w_ih`` ``(G * H, I)``, ``w_hh`` ``(G * H, H)``, ``b_ih`` / ``b_hh`` ``(G * H,)`` (both 0-d: no
bias), ``h0`` ``(B, H)``. ``mode`` is the cell: ``"gru"`` (G = 3, gates ``r, z, n`` as PyTorch
stacks them, ``b_hn`` inside the reset gate), ``"rnn_tanh"`` or ``"rnn_relu"`` (G = 1). The
output ``(T, B, H)`` holds each step's ``h_t`` in input time order; the final state is row
``T - 1`` (row 0 when ``reverse``). ``lstm_layer`` (ember/ops/lstm_layer.py) is the two-state
counterpart: the same backend library call, one more output row for the cell state.

It exists for backends whose library runs a whole recurrent layer in one call forward and one
backward: the torch backend on CUDA takes cuDNN's (``Backend.recurrent_layer_fused``), whose
residuals (its reserve space and packed weights) its backward reads. ``nn.GRU`` / ``nn.RNN`` use
this row where the backend has such a kernel (``Backend.recurrent_layer_takes``) and ``gru_seq``
/ ``rnn_seq`` elsewhere. On other backends the row is the input GEMM and that row's recurrence,
its residual the output sequence, and its backward that row's with the GEMM's gradients.
"""

from __future__ import annotations

from typing import Any

from ..errors import ShapeError
from .gru import _gru_seq_forward, gru_seq_backward
from .registry import Cost, Domain, Examples, Grads, Saves, defop
from .rnn import _rnn_seq_forward, rnn_seq_backward

MODES = ("gru", "rnn_tanh", "rnn_relu")


def _check(mode: str) -> None:
    if mode not in MODES:
        raise ShapeError(
            f"recurrent_layer: expected mode 'gru', 'rnn_tanh' or 'rnn_relu', got {mode!r}. "
            "Hint: an LSTM layer is the lstm_layer row."
        )


def projection(b: Any, x: Any, w_ih: Any, b_ih: Any, b_hh: Any, mode: str) -> Any:
    """``(T, B, G * H)``: ``x W_ih^T + b_ih`` for every step, one GEMM; an Elman cell's
    ``b_hh`` is added too (a GRU's stays out: the reset gate scales ``b_hn``)."""
    steps, batch, n_in = x.shape
    flat = b.matmul(b.reshape(x, (steps * batch, n_in)), b.permute(w_ih, (1, 0)))
    xw = b.reshape(flat, (steps, batch, w_ih.shape[0]))
    if not b_ih.ndim:
        return xw
    return xw + b_ih if mode == "gru" else xw + (b_ih + b_hh)


def sequence(b: Any, xw: Any, w_hh: Any, b_hh: Any, h0: Any, mode: str, reverse: bool) -> Any:
    """``(T, B, H)``: the recurrence of ``gru_seq`` or ``rnn_seq`` over the projection ``xw``."""
    if mode == "gru":
        return _gru_seq_forward(b, xw, w_hh, b_hh, h0, reverse)
    return _rnn_seq_forward(b, xw, w_hh, h0, reverse, mode[4:])


def _recurrent_layer_forward(
    b: Any, x: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, h0: Any, mode: str, reverse: bool
) -> tuple[Any, Any]:
    """``(out, saved)``: the ``(T, B, H)`` output and what the backward reads."""
    _check(mode)
    fused = b.recurrent_layer_fused(x, w_ih, w_hh, b_ih, b_hh, h0, mode, reverse)
    if fused is not None:
        return fused
    seq = sequence(b, projection(b, x, w_ih, b_ih, b_hh, mode), w_hh, b_hh, h0, mode, reverse)
    return seq, seq


class _SeqContext:
    """What ``gru_seq``'s / ``rnn_seq``'s rule reads of its context, for the recurrence inside
    this row (every gradient wanted, but a 0-d ``b_hh``'s)."""

    __slots__ = ("attrs", "b", "inputs", "output", "parents", "shapes")

    def __init__(self, b: Any, inputs: tuple[Any, ...], seq: Any, attrs: dict[str, Any]) -> None:
        self.b = b
        self.inputs = inputs
        self.output = seq
        self.attrs = attrs
        self.shapes = tuple(tuple(v.shape) for v in inputs)
        self.parents = tuple(bool(v.ndim) or None for v in inputs)


def _examples(rng: Any) -> Examples:
    n = rng.normal
    cases = []
    for mode, g in (("gru", 6), ("rnn_tanh", 2), ("rnn_relu", 2)):
        for r in (False, True):
            ws = (n(size=(g, 5)) * 0.5, n(size=(g, 2)) * 0.7, *(n(size=(g,)) * 0.3 for _ in "io"))
            cases.append(((n(size=(3, 2, 5)), *ws, n(size=(2, 2))), {"mode": mode, "reverse": r}))
    return cases  # (no-bias 0-d placeholders are constants: tests/unit/nn/test_rnn_layer_path.py)


def _flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
    (steps, batch, n_in), (g, hid) = shapes[0], shapes[2]
    return float(steps * batch * g * (n_in + hid + 4))


@defop(
    "recurrent_layer",
    arity=6,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.RESIDUALS,
    dtypes=Domain.FLOAT,
    forward=_recurrent_layer_forward,
    examples=_examples,
    smooth=False,  # relu's kink
    flops=_flops,
)
def recurrent_layer_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    x, w_ih, w_hh, b_ih, b_hh, h0 = ctx.inputs
    mode, reverse = ctx.attrs["mode"], ctx.attrs["reverse"]
    if isinstance(ctx.saved, tuple):  # a fused kernel's own residuals: its own backward
        return b.recurrent_layer_fused_backward(
            grad, x, w_ih, w_hh, b_ih, b_hh, h0, ctx.saved, mode, reverse
        )
    seq = ctx.saved
    steps, batch, n_in = x.shape
    xw = projection(b, x, w_ih, b_ih, b_hh, mode)
    if mode == "gru":
        sctx = _SeqContext(b, (xw, w_hh, b_hh, h0), seq, {"reverse": reverse})
        dxw, dw_hh, db_hh, dh0 = gru_seq_backward(sctx, grad)
    else:
        attrs = {"reverse": reverse, "nonlinearity": mode[4:]}
        dxw, dw_hh, dh0 = rnn_seq_backward(_SeqContext(b, (xw, w_hh, h0), seq, attrs), grad)
        db_hh = None
    assert dxw is not None  # every gradient of the recurrence is wanted
    flat = b.reshape(dxw, (steps * batch, w_ih.shape[0]))
    dx = b.reshape(b.matmul(flat, w_ih), (steps, batch, n_in))
    dw_ih = b.matmul(b.permute(flat, (1, 0)), b.reshape(x, (steps * batch, n_in)))
    db_ih = b.sum_dim(flat, 0) if b_ih.ndim else None
    if mode != "gru":
        db_hh = db_ih
    return dx, dw_ih, dw_hh, db_ih, db_hh if b_ih.ndim else None, dh0
