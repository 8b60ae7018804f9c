"""Matrix products: compute-bound."""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Grads, Saves, defop


def _matmul_examples(rng: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    n = rng.normal
    return [
        ((n(size=(3, 4)), n(size=(4, 5))), {}),
        ((n(size=(2, 3, 4)), n(size=(4, 2))), {}),  # broadcast rhs over the batch
        ((n(size=(2, 1, 3, 4)), n(size=(3, 4, 2))), {}),  # batch dims broadcast both ways
    ]


@defop(
    "matmul",
    arity=2,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS,
    dtypes=Domain.NUMERIC,
    examples=_matmul_examples,
)
def matmul_backward(ctx: Any, grad: Any) -> Grads:
    x, y = ctx.inputs
    # the engine sums the broadcast batch dims back to each input's shape
    gx = grad @ y.mT if ctx.parents[0] is not None else None
    gy = None
    if ctx.parents[1] is not None:
        if y.ndim == 2 and x.ndim > 2:
            # (..., K) x (K, N), as in a linear layer: one (K, M) @ (M, N) product over all
            # leading dims instead of a batched product and a sum over the batch
            b = ctx.b
            gy = b.reshape(x, (-1, x.shape[-1])).mT @ b.reshape(grad, (-1, grad.shape[-1]))
        else:
            gy = x.mT @ grad
    return gx, gy
