"""The whole-sequence GRU row: one call per layer and direction, forward and backward.

``gru_seq(xw, w_hh, b_hh, h0, reverse)``: ``xw`` ``(T, B, 3H)`` is ``x W_ih^T + b_ih`` for
every step, ``w_hh`` ``(3H, H)`` and ``b_hh`` ``(3H,)`` the recurrent weight and bias (gates
``r, z, n`` as PyTorch stacks them; a 0-d ``b_hh`` is the "no bias" placeholder), ``h0``
``(B, H)``. ``b_hh`` stays apart from ``xw`` because PyTorch scales ``b_hn`` by the reset gate:

    hw = h W_hh^T + b_hh,  r, z = sigmoid(xw_rz + hw_rz),  n = tanh(xw_n + r * hw_n),
    h' = n + z * (h - n).

The output ``(T, B, H)`` holds every ``h_t``. The backward recomputes ``hw`` of all steps in one
GEMM from the previous states (read off the output), the gate factors in whole-sequence passes,
and loops only ``dh_{t-1} = dhw_t W_hh + dh_t z_t`` (``ember/ops/recurrent.py``).
"""

from __future__ import annotations

from typing import Any

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
from .registry import Cost, Domain, Grads, Saves, defop


def _gru_seq_forward(b: Any, xw: Any, w_hh: Any, b_hh: Any, h0: Any, reverse: bool) -> Any:
    """``(T, B, H)``: ``h_t`` of every step."""
    hid = h0.shape[-1]
    rz, nk = (ALL, slice(0, 2 * hid)), (ALL, slice(2 * hid, 3 * hid))
    zk = (ALL, slice(hid, 2 * hid))

    def cell(b: Any, xw_t: Any, hw_t: Any, state: State) -> State:
        h = state[0]
        if b_hh.ndim:
            hw_t = hw_t + b_hh
        s = b.sigmoid(b.index(xw_t, rz) + b.index(hw_t, rz))  # (B, 2H): [r | z]
        n = b.tanh(b.index(xw_t, nk) + b.index(s, (ALL, slice(0, hid))) * b.index(hw_t, nk))
        return (n + b.index(s, zk) * (h - n),)

    return scan(b, xw, w_hh, (h0,), cell, reverse)[0]


@defop(
    "gru_seq",
    arity=4,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.OUTPUT,
    dtypes=Domain.FLOAT,
    forward=_gru_seq_forward,
    examples=lambda rng: seq_examples(rng, 3, 1, [{"reverse": False}, {"reverse": True}], True),
    flops=seq_flops(3),
)
def gru_seq_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    xw, w_hh, b_hh, h0 = ctx.inputs
    reverse = ctx.attrs["reverse"]
    hid = h0.shape[-1]
    k0, k1, k2 = ((ALL, ALL, slice(k * hid, (k + 1) * hid)) for k in range(3))
    k01 = (ALL, ALL, slice(0, 2 * hid))
    hp = previous(b, ctx.output, h0, reverse)
    hw = flat_matmul(b, hp, transposed(b, w_hh))  # (T, B, 3H): every step's h W_hh^T
    if b_hh.ndim:
        hw = hw + b_hh
    s = b.sigmoid(b.index(xw, k01) + b.index(hw, k01))  # (T, B, 2H): [r | z]
    r, z = b.index(s, k0), b.index(s, k1)
    hn = b.index(hw, k2)
    n = b.tanh(b.index(xw, k2) + r * hn)
    fac_n = (1 - z) * (1 - n * n)  # d(xw_n) / dh'
    # dhw_t = [dh, dh, dh] * fac_t: the gradient of h W_hh^T + b_hh, every step's factor at once
    fac = b.cat([fac_n * hn * r * (1 - r), (hp - n) * z * (1 - z), fac_n * r], 2)

    def step(t: int, dh: Any, carry: Any) -> tuple[Any, Any, Any]:
        return b.cat([dh, dh, dh], 1) * b.index(fac, (t,)), dh * b.index(z, (t,)), None

    dhw, dhs, dh0, _ = unscan(b, grad, w_hh, step, reverse)
    # xw's gradient is dhw's but for the n gate, which r does not scale on the input side
    rz = b.index(dhw, k01)
    dxw = b.cat([rz, b.cat([b.reshape(d, (1, *d.shape)) for d in dhs], 0) * fac_n], 2)
    dw = weight_grad(b, dhw, hp) if ctx.parents[1] is not None else None
    db = None
    if ctx.parents[2] is not None:
        db = b.sum_to_shape(dhw, ctx.shapes[2]) if len(ctx.shapes[2]) else b.zeros_like(b_hh)
    return dxw, dw, db, dh0
