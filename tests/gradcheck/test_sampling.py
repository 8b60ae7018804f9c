"""The shared sampler: every registry row can be sampled and run, and default shapes broadcast."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from helpers.sampling import (
    DEFAULT_DOMAIN,
    broadcast_shapes,
    run_row,
    runtime_attrs,
    sample_cases,
    to_tensors,
)

import ember as em
from ember.ops.registry import OPS, OpSpec


@pytest.mark.parametrize("spec", [s for s in OPS.values() if not s.random], ids=lambda s: s.name)
def test_every_row_samples_and_runs(spec: OpSpec) -> None:
    """A row whose forward needs attributes or non-float inputs must declare ``examples``."""
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    cases = sample_cases(spec, rng)
    assert cases, f"{spec.name}: no cases"
    dev = em.Device.cpu()
    for arrays, attrs in cases:
        assert all(isinstance(a, np.ndarray) for a in arrays)
        if spec.arity > 0:
            assert len(arrays) == spec.arity, f"{spec.name}: expected {spec.arity} inputs"
        try:
            out = run_row(
                spec, to_tensors(arrays, dev, require_grad=False), runtime_attrs(spec, attrs, dev)
            )
        except TypeError as e:  # missing attributes surface as a TypeError from the forward
            pytest.fail(f"{spec.name}: sampled case does not run ({e}); give the row examples=")
        assert isinstance(out, em.Tensor)


def test_default_inputs_respect_the_domain() -> None:
    rng = np.random.default_rng(0)
    for spec in OPS.values():
        if spec.examples is not None:
            continue
        lo, hi = spec.domain or DEFAULT_DOMAIN
        for arrays, attrs in sample_cases(spec, rng):
            assert attrs == {}
            for a in arrays:
                assert a.dtype == np.float64 and np.all((lo <= a) & (a <= hi)), spec.name


@pytest.mark.parametrize("n", [2, 3])
def test_broadcast_shapes_broadcast(n: int) -> None:
    rng = np.random.default_rng(n)
    saw_broadcast = False
    for _ in range(50):
        shapes = broadcast_shapes(rng, n)
        out = np.broadcast_shapes(*shapes)
        assert out in shapes  # one operand carries the full shape
        saw_broadcast |= any(s != out for s in shapes)
    assert saw_broadcast
