"""The weight-only quantized product: a float ``x`` times int8 values whose columns carry scales.

``int8_weight_matmul(x, w, s)``: ``x`` ``(*, K)`` float, ``w`` ``(K, N)`` int8 (any strides: a
Linear weight quantized per output channel is read as its transpose, no copy), ``s`` ``(1, N)``
float scales -> ``(x @ w) * s`` ``(*, N)`` in ``x``'s dtype. Backends dequantize inside the
product (a Triton kernel on CUDA converts each int8 tile in registers: the float weight never
exists in memory); the default converts ``w`` to ``x``'s dtype first. ``w`` is a constant (an
int8 tensor has no gradient); ``x`` and ``s`` are differentiable.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Examples, Grads, Precision, Saves, defop, matmul_flops


def _examples(rng: Any) -> Examples:
    def case(lead: tuple[int, ...], k: int, n: int) -> Any:
        w = rng.integers(-127, 128, size=(k, n), dtype="int8")
        return (rng.normal(size=(*lead, k)), w, rng.uniform(0.01, 0.1, size=(1, n))), {}

    return [case((3,), 4, 5), case((2, 3), 6, 2), case((1,), 8, 3)]


def _flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
    return matmul_flops(shapes[:2], attrs)


@defop(
    "int8_weight_matmul",
    precision=Precision.LOW,
    arity=3,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    examples=_examples,
    flops=_flops,
)
def int8_weight_matmul_backward(ctx: Any, grad: Any) -> Grads:
    b = ctx.b
    x, w, s = ctx.inputs
    dt = b.dtype_of(x)  # the output's (and the gradient's) dtype
    wf = b.cast(w, dt)
    dx = ds = None
    if ctx.parents[0] is not None:
        s_dt = s if b.dtype_of(s) == dt else b.cast(s, dt)
        dx = b.matmul(grad * s_dt, b.permute(wf, (1, 0)))
    if ctx.parents[2] is not None:
        n = w.shape[1]
        prod = b.reshape(grad * b.matmul(x, wf), (-1, n))
        ds = b.reshape(b.sum_dim(prod, 0), (1, n))
        ds = ds if b.dtype_of(ds) == b.dtype_of(s) else b.cast(ds, b.dtype_of(s))
    return dx, None, ds
