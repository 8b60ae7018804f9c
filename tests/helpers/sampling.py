"""Inputs for registry rows, shared by the gradcheck, differential and property suites.

A *case* is ``(arrays, attrs)``: NumPy arrays (float64 for float inputs, int64/bool for index or
mask inputs) and the row's keyword attributes, in the order its forward takes them. Rows with
``examples`` use them; others get arity-many float64 arrays of random broadcast-compatible shapes
drawn from the row's ``domain`` (default (-2, 2)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import ember as em
from ember._core.dispatch import apply
from ember.ops.registry import OpSpec

Case = tuple[tuple[np.ndarray, ...], dict[str, Any]]
DEFAULT_DOMAIN = (-2.0, 2.0)


def broadcast_shapes(rng: np.random.Generator, n: int) -> list[tuple[int, ...]]:
    """``n`` distinct-ish shapes that broadcast together (leading axes dropped, sizes set to 1)."""
    ndim = int(rng.integers(1, 4))
    full = tuple(int(s) for s in rng.integers(2, 5, size=ndim))
    shapes = [full]  # one operand has the full shape, so the output shape is ``full``
    for _ in range(n - 1):
        drop = int(rng.integers(0, ndim + 1))
        s = [1 if rng.random() < 0.4 else d for d in full[drop:]]
        shapes.append(tuple(s))
    order = rng.permutation(n)
    return [shapes[i] for i in order]


def sample_cases(spec: OpSpec, rng: np.random.Generator) -> list[Case]:
    """The cases a suite checks for ``spec``; none for a row whose kernel draws random numbers
    (attention's fused dropout on CUDA: no two runs, backends or finite differences agree;
    tests/cuda/test_attention_dropout.py checks it)."""
    if spec.random:
        return []
    if spec.examples is not None:
        return [
            (tuple(np.asarray(a) for a in arrays), dict(attrs))
            for arrays, attrs in spec.examples(rng)
        ]
    lo, hi = spec.domain or DEFAULT_DOMAIN
    n = spec.arity if spec.arity > 0 else 2

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        return rng.uniform(lo, hi, size=shape)

    same = tuple(int(s) for s in rng.integers(2, 5, size=2))
    cases: list[Case] = [(tuple(draw(same) for _ in range(n)), {})]
    if n == 1:
        cases.append(((draw(()),), {}))  # 0-d
        cases.append(((draw((2, 1, 3)),), {}))
    elif spec.arity > 0:
        for _ in range(2):
            cases.append((tuple(draw(s) for s in broadcast_shapes(rng, n)), {}))
    return cases


def runtime_attrs(spec: OpSpec, attrs: dict[str, Any], device: em.Device) -> dict[str, Any]:
    """Fill attributes that name run-time objects (the backends of a ``to_device`` move)."""
    if spec.name == "to_device":
        b = device.without_autodiff().b
        return {"src": b, "dst": b}
    return attrs


def to_tensors(
    arrays: Sequence[np.ndarray], device: em.Device, *, require_grad: bool
) -> list[em.Tensor]:
    """Tensors on ``device``: float arrays as float64 (require-grad leaves when asked and the
    device is autodiff); int/bool arrays keep their dtype and never require grad."""
    out = []
    for a in arrays:
        if a.dtype.kind == "f":
            t = em.Tensor.from_data(a, device=device, dtype=em.float64)
            if require_grad:
                t = t.require_grad()
        else:
            t = em.Tensor.from_data(a, device=device)
        out.append(t)
    return out


def run_row(spec: OpSpec, tensors: Sequence[em.Tensor], attrs: dict[str, Any]) -> em.Tensor:
    """Run one row through the Tensor layer's dispatch."""
    xs = list(tensors) if spec.arity == -1 else tuple(tensors)
    return apply(spec, xs, attrs)


def is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"
