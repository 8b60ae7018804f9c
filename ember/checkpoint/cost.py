"""Recompute cost estimates of recorded ops, read by the budget strategy and ``report``.

The unit is a flop-equivalent: one multiply-add counts 2, one element read or written counts
the backend's ``pass_cost`` (``Backend.pass_cost``, 8 on a CPU; on a GPU, whose arithmetic
outruns its memory far more, about 50 times that), and running an op at all counts its
``op_cost`` (a GPU kernel's launch and ramp; 0 on a CPU). A row declares its arithmetic with
``OpSpec.flops(input_shapes, attrs)`` (matmul, linear, convolutions, attention, fused losses);
without one, a memory-bound row costs one pass over its inputs and output, a compute-bound row
``COMPUTE_PASSES`` of them (reductions, pooling, sorts, gathers). Only the ratios matter: they
rank what a budget drops first.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..backend.base import Backend
    from ..ops.registry import OpSpec

COMPUTE_PASSES = 4.0  # a compute-bound row without a ``flops`` estimate: this many passes


def recompute_cost(
    spec: OpSpec,
    shapes: tuple[tuple[int, ...], ...],
    out_shape: tuple[int, ...],
    attrs: dict[str, object],
    b: Backend,
) -> float:
    """Estimated cost of running ``spec``'s forward once on inputs of ``shapes``, on ``b``."""
    moved = b.pass_cost * (sum(map(prod, shapes)) + prod(out_shape))
    if spec.flops is not None:
        return 2.0 * spec.flops(shapes, attrs) + moved + b.op_cost
    return (moved if spec.memory_bound else COMPUTE_PASSES * moved) + b.op_cost
