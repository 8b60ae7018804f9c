"""Matrix products: compute-bound."""

from __future__ import annotations

from typing import Any

from .registry import (
    Cost,
    Domain,
    Examples,
    Grads,
    Precision,
    Saves,
    defop,
    linear_flops,
    matmul_flops,
)


def _matmul_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 4)), n(size=(4, 5))), {}),
        ((n(size=(2, 3, 4)), n(size=(4, 2))), {}),  # broadcast rhs over the batch
        ((n(size=(2, 1, 3, 4)), n(size=(3, 4, 2))), {}),  # batch dims broadcast both ways
    ]


@defop(
    "matmul",
    precision=Precision.LOW,
    arity=2,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_matmul_examples,
    flops=matmul_flops,
)
def matmul_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    # the engine sums the broadcast batch dims back to each input's shape
    b = ctx.b  # b.matmul: backends split large products (NumPy's kernel pool)
    gx = b.matmul(grad, y.mT) if ctx.parents[0] is not None else None
    gy = None
    if ctx.parents[1] is not None:
        if y.ndim == 2 and x.ndim > 2:
            # (..., K) x (K, N), as in a linear layer: one (K, M) @ (M, N) product over all
            # leading dims instead of a batched product and a sum over the batch
            gy = b.matmul(b.reshape(x, (-1, x.shape[-1])).mT, b.reshape(grad, (-1, grad.shape[-1])))
        else:
            gy = b.matmul(x.mT, grad)
    return gx, gy


def _linear_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 4)), n(size=(5, 4)), n(size=(5,))), {}),
        ((n(size=(2, 3, 4)), n(size=(2, 4)), n(size=(2,))), {}),  # leading dims of the input
        ((n(size=(4,)), n(size=(3, 4)), n(size=(3,))), {}),  # a 1-D input
    ]


@defop(
    "linear",
    precision=Precision.LOW,
    arity=3,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    dtypes=Domain.FLOAT,
    examples=_linear_examples,
    flops=linear_flops,
)
def linear_backward(ctx: Any, grad: Any) -> Grads:
    """x (*, K) @ w (N, K)^T + b (N,): one fused row (a single addmm on torch).

    A 0-d ``b`` means no bias (the row's placeholder, as for attention).
    """
    x, w, _ = ctx.inputs
    b = ctx.b
    gx = b.matmul(grad, w) if ctx.parents[0] is not None else None
    gw = gb = None
    if ctx.parents[1] is not None:
        # (N, M) @ (M, K) over all leading dims at once: the weight's own (N, K) layout
        gw = b.matmul(b.reshape(grad, (-1, grad.shape[-1])).mT, b.reshape(x, (-1, x.shape[-1])))
    if ctx.parents[2] is not None and len(ctx.shapes[2]):  # a 0-d placeholder gets none
        gb = b.sum_to_shape(grad, ctx.shapes[2])
    return gx, gw, gb
