"""Rows for backend calls that backward rules make: each is a differentiable row itself, so a rule
recorded under ``backward(create_graph=True)`` (``ember.autodiff.rule_backend``) is built from rows
only and can be differentiated again.

``softplus``: ``log(1 + exp(x))``, which the logits form of binary cross-entropy differentiates to.
"""

from __future__ import annotations

from typing import Any

from .registry import Cost, Domain, Grads, Saves, defop


@defop("softplus", arity=1, cost=Cost.MEMORY_BOUND, saves=Saves.INPUTS, dtypes=Domain.FLOAT)
def softplus_backward(ctx: Any, grad: Any) -> Grads:
    # d log(1 + e^x) = sigmoid(x)
    return (grad * ctx.b.sigmoid(ctx.inputs[0]),)
