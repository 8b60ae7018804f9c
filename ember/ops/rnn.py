"""The whole-sequence LSTM row: one call per layer and direction, forward and backward.

``lstm_seq(xw, w_hh, h0, c0, reverse)``: ``xw`` ``(T, B, 4H)`` is the input projection of every
step (``x W_ih^T + b_ih + b_hh``, one GEMM outside the row), ``w_hh`` ``(4H, H)`` the recurrent
weight (gates ``i, f, g, o`` as PyTorch stacks them), ``h0`` / ``c0`` ``(B, H)`` the initial
state. The output ``(T, B, 2H)`` holds each step's ``[h_t | c_t]`` in input time order (``reverse``
runs the recurrence from the last step to the first, a bidirectional layer's second half).

The backward saves nothing but the inputs and the output: the pre-activations of all steps are
recomputed in one GEMM from the previous hidden states (read off the output), the gate
derivative factors in a few whole-sequence elementwise passes, and only the recurrence
``dh_{t-1} = dz_t W_hh``, ``dc_{t-1} = dc_t f_t`` loops over time; ``dW_hh`` is one GEMM over the
stacked step gradients. Written with backend methods only, so every backend runs it and it is
differentiable twice.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Examples, Grads, Saves, defop

_ALL = slice(None)


def _lstm_seq_forward(b: Any, xw: Any, w_hh: Any, h0: Any, c0: Any, reverse: bool) -> Any:
    """``(T, B, 2H)``: ``[h_t | c_t]`` of every step."""
    steps, hid = xw.shape[0], h0.shape[-1]
    w_t = b.copy(b.permute(w_hh, (1, 0)))  # (H, 4H), contiguous: BLAS runs faster on it
    gi, gf, gg, go = ((_ALL, slice(k * hid, (k + 1) * hid)) for k in range(4))
    hs: list[Any] = [None] * steps
    cs: list[Any] = [None] * steps
    h, c = h0, c0
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        z = b.index(xw, (t,)) + b.matmul(h, w_t)  # (B, 4H)
        s = b.sigmoid(z)
        c = b.index(s, gf) * c + b.index(s, gi) * b.tanh(b.index(z, gg))
        h = b.index(s, go) * b.tanh(c)
        hs[t], cs[t] = h, c
    return b.cat([b.stack(hs, 0), b.stack(cs, 0)], 2)


def _examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 2, 8)), n(size=(8, 2)) * 0.7, n(size=(2, 2)), n(size=(2, 2))), {"reverse": r})
        for r in (False, True)
    ] + [((n(size=(1, 3, 4)), n(size=(4, 1)), n(size=(3, 1)), n(size=(3, 1))), {"reverse": False})]


def _flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
    steps, batch, g4 = shapes[0]
    return float(steps * batch * g4 * (g4 // 4 + 6))


@defop(
    "lstm_seq",
    arity=4,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.OUTPUT,
    dtypes=Domain.FLOAT,
    forward=_lstm_seq_forward,
    examples=_examples,
    flops=_flops,
)
def lstm_seq_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    xw, w_hh, h0, c0 = ctx.inputs
    out = ctx.output
    reverse = ctx.attrs["reverse"]
    steps, batch, g4 = xw.shape
    hid = g4 // 4
    lo, hi = (_ALL, _ALL, slice(0, hid)), (_ALL, _ALL, slice(hid, 2 * hid))
    hs, cs = b.index(out, lo), b.index(out, hi)
    h0e, c0e = b.reshape(h0, (1, batch, hid)), b.reshape(c0, (1, batch, hid))
    # the state each step started from: h_{t-1} (h_{t+1} when reversed), h0 at the first step
    if reverse:
        hp = b.cat([b.index(hs, (slice(1, steps),)), h0e], 0)
        cp = b.cat([b.index(cs, (slice(1, steps),)), c0e], 0)
    else:
        hp = b.cat([h0e, b.index(hs, (slice(0, steps - 1),))], 0)
        cp = b.cat([c0e, b.index(cs, (slice(0, steps - 1),))], 0)
    w_t = b.copy(b.permute(w_hh, (1, 0)))  # (H, 4H), contiguous
    # (T, B, 4H): every step's pre-activations in one 2-D GEMM
    z = xw + b.reshape(b.matmul(b.reshape(hp, (steps * batch, hid)), w_t), (steps, batch, g4))
    s = b.sigmoid(z)
    gi, gf, go = (b.index(s, (_ALL, _ALL, slice(k * hid, (k + 1) * hid))) for k in (0, 1, 3))
    gg = b.tanh(b.index(z, (_ALL, _ALL, slice(2 * hid, 3 * hid))))
    tc = b.tanh(cs)
    dc_dh = go * (1 - tc * tc)  # dc_t / dh_t through h_t = o tanh(c_t)
    # dz_t = [dc, dc, dc, dh] * fac_t: the gate derivatives, every step at once
    fac = b.cat([gg * gi * (1 - gi), cp * gf * (1 - gf), gi * (1 - gg * gg), tc * go * (1 - go)], 2)
    gh, gc = b.index(grad, lo), b.index(grad, hi)
    dzs: list[Any] = [None] * steps
    dh_next: Any = None
    dc_next: Any = None
    for t in range(steps) if reverse else range(steps - 1, -1, -1):
        dh = b.index(gh, (t,))
        if dh_next is not None:
            dh = dh + dh_next
        dc = b.index(gc, (t,)) + dh * b.index(dc_dh, (t,))
        if dc_next is not None:
            dc = dc + dc_next
        dz = b.cat([dc, dc, dc, dh], 1) * b.index(fac, (t,))  # (B, 4H)
        dh_next = b.matmul(dz, w_hh)
        dc_next = dc * b.index(gf, (t,))
        dzs[t] = b.reshape(dz, (1, batch, g4))
    dz_all = b.cat(dzs, 0)  # (T, B, 4H): the gradient of xw
    dw = None
    if ctx.parents[1] is not None:
        flat = b.reshape(dz_all, (steps * batch, g4))
        dw = b.matmul(b.permute(flat, (1, 0)), b.reshape(hp, (steps * batch, hid)))
    return dz_all, dw, dh_next, dc_next
