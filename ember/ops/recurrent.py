"""What the whole-sequence recurrent rows share (``lstm_seq``, ``gru_seq``, ``rnn_seq``).

Every row takes ``xw`` ``(T, B, G * H)``, the input projection of all steps (one GEMM outside the
row), the recurrent weight ``w_hh`` ``(G * H, H)`` (G gates stacked as PyTorch does) and
initial states ``(B, H)``; ``reverse`` runs the recurrence from the last step to the first (a
bidirectional layer's second half), the output still in input time order.

Forward: ``scan`` loops over time, multiplying the hidden state by a contiguous ``W_hh^T``
(BLAS runs 2-3x faster on it than on the transposed view). Backward: ``previous`` reads the
state each step started from off the saved output, the rows recompute what they need in one
2-D GEMM over all steps (``flat_matmul``), and ``unscan`` loops only the recurrence
``dh_{t-1} = dhw_t W_hh (+ what the cell passes straight through)``; ``weight_grad`` is one GEMM
over the stacked step gradients. Backend methods only, so every backend runs the rows and they
are differentiable twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .registry import Examples

ALL = slice(None)
State = tuple[Any, ...]
# (b, xw_t, h_{t-1} W_hh^T, state_{t-1}) -> state_t; state[0] is the hidden state h
Cell = Callable[[Any, Any, Any, State], State]
# (t, dh_t, carry) -> (dhw_t, dh_{t-1} passed straight through or None, carry for step t-1)
BackStep = Callable[[int, Any, Any], tuple[Any, Any, Any]]


def steps_in_order(steps: int, reverse: bool) -> range:
    """The forward pass's time order."""
    return range(steps - 1, -1, -1) if reverse else range(steps)


def transposed(b: Any, w: Any) -> Any:
    """``w^T`` as a contiguous array."""
    return b.copy(b.permute(w, (1, 0)))


def scan(b: Any, xw: Any, w_hh: Any, init: State, cell: Cell, reverse: bool) -> list[Any]:
    """Run ``cell`` over the sequence; one ``(T, B, H)`` array per state, in input time order."""
    steps = xw.shape[0]
    w_t = transposed(b, w_hh)  # (H, G * H)
    seqs: list[list[Any]] = [[None] * steps for _ in init]
    state = init
    for t in steps_in_order(steps, reverse):
        state = cell(b, b.index(xw, (t,)), b.matmul(state[0], w_t), state)
        for seq, s in zip(seqs, state):
            seq[t] = s
    return [b.stack(seq, 0) for seq in seqs]


def previous(b: Any, seq: Any, init: Any, reverse: bool) -> Any:
    """``(T, B, H)``: the state each step started from (``init`` at the first step run)."""
    steps, batch, hid = seq.shape
    first = b.reshape(init, (1, batch, hid))
    if reverse:
        return b.cat([b.index(seq, (slice(1, steps),)), first], 0)
    return b.cat([first, b.index(seq, (slice(0, steps - 1),))], 0)


def flat_matmul(b: Any, x: Any, w: Any) -> Any:
    """``(T, B, K) @ (K, N)`` as one 2-D GEMM (NumPy runs the 3-D product much slower)."""
    steps, batch, k = x.shape
    out = b.matmul(b.reshape(x, (steps * batch, k)), w)
    return b.reshape(out, (steps, batch, w.shape[1]))


def unscan(
    b: Any, grad_h: Any, w_hh: Any, step: BackStep, reverse: bool
) -> tuple[Any, list[Any], Any, Any]:
    """The backward recurrence from the last step run to the first.

    ``grad_h`` ``(T, B, H)`` is the incoming gradient of every step's hidden state. Returns the
    stacked ``dhw`` ``(T, B, G * H)`` (each step's gradient of ``h_{t-1} W_hh^T``), the total
    gradient ``dh_t`` of every step (a list in time order), the initial state's gradient and
    ``step``'s last carry (the LSTM's ``dc_0``).
    """
    steps, batch, _ = grad_h.shape
    dhws: list[Any] = [None] * steps
    dhs: list[Any] = [None] * steps
    dh_next: Any = None
    carry: Any = None
    for t in reversed(steps_in_order(steps, reverse)):
        dh = b.index(grad_h, (t,))
        if dh_next is not None:
            dh = dh + dh_next
        dhw, through, carry = step(t, dh, carry)
        dh_next = b.matmul(dhw, w_hh)
        if through is not None:
            dh_next = dh_next + through
        dhws[t] = b.reshape(dhw, (1, batch, dhw.shape[1]))
        dhs[t] = dh
    return b.cat(dhws, 0), dhs, dh_next, carry


def weight_grad(b: Any, dhw: Any, prev: Any) -> Any:
    """``dW_hh`` ``(G * H, H)``: the sum over steps of ``dhw_t^T h_{t-1}``, one GEMM."""
    steps, batch, g = dhw.shape
    flat = b.reshape(dhw, (steps * batch, g))
    return b.matmul(b.permute(flat, (1, 0)), b.reshape(prev, (steps * batch, prev.shape[2])))


def seq_flops(gates: int) -> Callable[[tuple[tuple[int, ...], ...], dict[str, Any]], float]:
    """A row's forward multiply-adds: the recurrent GEMM and a few elementwise passes per gate
    value (the registry counts multiply-adds, as ``linear_flops``)."""

    def flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
        steps, batch, g = shapes[0]
        return float(steps * batch * g * (g // gates + 6))

    return flops


def seq_examples(
    rng: Any, gates: int, states: int, attrs: list[dict[str, Any]], bias: bool = False
) -> Examples:
    """Cases for a row ``(xw, w_hh[, b_hh], *states)``: ``(3, 2)`` steps by batch at H = 2 for
    each of ``attrs``, then one step of batch 3 at H = 1 (with a 0-d "no bias" placeholder)."""
    n = rng.normal

    def case(steps: int, batch: int, hid: int, a: dict[str, Any], b_shape: Any) -> Any:
        g = gates * hid
        ins = [n(size=(steps, batch, g)), n(size=(g, hid)) * 0.7]
        if b_shape is not None:
            ins.append(n(size=b_shape))
        return (tuple(ins + [n(size=(batch, hid)) for _ in range(states)]), a)

    g2 = (gates * 2,) if bias else None
    return [case(3, 2, 2, a, g2) for a in attrs] + [case(1, 3, 1, attrs[0], () if bias else None)]
