"""The weight-only quantized product: a float ``x`` times int8 weight rows that carry scales.

``int8_weight_linear(x, w, s)``: ``x`` ``(*, K)`` float, ``w`` ``(N, K)`` int8 (a Linear weight
quantized per output channel, any strides), ``s`` ``(N, 1)`` float scales (``(1, 1)``: one per
tensor) -> ``(x @ w^T) * s^T`` ``(*, N)`` in ``x``'s dtype. Backends dequantize inside the
product (a Triton kernel on CUDA converts each int8 tile in registers: the float weight never
exists in memory); the default converts ``w`` to ``x``'s dtype first. ``w`` is a constant (an
int8 tensor has no gradient); ``x`` and ``s`` are differentiable.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Examples, Grads, Precision, Saves, defop


def _examples(rng: Any) -> Examples:
    def case(lead: tuple[int, ...], k: int, n: int, per_tensor: bool = False) -> Any:
        w = rng.integers(-127, 128, size=(n, k), dtype="int8")
        s = rng.uniform(0.01, 0.1, size=(1, 1) if per_tensor else (n, 1))
        return (rng.normal(size=(*lead, k)), w, s), {}

    return [case((3,), 4, 5), case((2, 3), 6, 2), case((1,), 8, 3, per_tensor=True)]


def _flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
    x, w = shapes[0], shapes[1]
    lead = 1
    for d in x[:-1]:
        lead *= d
    return float(lead * w[0] * w[1])


@defop(
    "int8_weight_linear",
    precision=Precision.LOW,
    arity=3,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    examples=_examples,
    flops=_flops,
)
def int8_weight_linear_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    x, w, s = ctx.inputs
    dt = b.dtype_of(x)  # the output's (and the gradient's) dtype
    wf = b.cast(w, dt)  # (N, K)
    s_row = b.permute(s, (1, 0))  # (1, N) or (1, 1)
    dx = ds = None
    if ctx.parents[0] is not None:
        s_dt = s_row if b.dtype_of(s) == dt else b.cast(s_row, dt)
        dx = b.matmul(grad * s_dt, wf)
    if ctx.parents[2] is not None:
        n = w.shape[0]
        prod = b.reshape(grad * b.matmul(x, b.permute(wf, (1, 0))), (-1, n))
        ds = b.reshape(b.sum_dim(prod, 0), (n, 1))
        if s.shape[0] == 1:  # one scale for the tensor
            ds = b.reshape(b.sum(ds), (1, 1))
        ds = ds if b.dtype_of(ds) == b.dtype_of(s) else b.cast(ds, b.dtype_of(s))
    return dx, None, ds
