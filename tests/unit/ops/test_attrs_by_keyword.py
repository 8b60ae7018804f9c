"""Seam: a row's attrs reach its forward as keywords, so their dict order never matters."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember.ops.registry import OPS, OpSpec, run_forward
from tests.helpers.sampling import run_row, runtime_attrs, sample_cases, to_tensors

_WITH_ATTRS = sorted(
    name
    for name, spec in OPS.items()
    if any(attrs for _, attrs in sample_cases(spec, np.random.default_rng(0)))
)


def _values(t: Any) -> list[np.ndarray]:
    return [x.to_numpy() for x in t] if isinstance(t, (list, tuple)) else [t.to_numpy()]


def test_rows_with_attrs_are_sampled() -> None:
    # the keyword contract is exercised on the rows whose attrs differ in order between kernels
    assert {"conv2d", "conv_transpose2d", "mul_scalar", "reshape", "expand"} <= set(_WITH_ATTRS)


@pytest.mark.parametrize("name", _WITH_ATTRS)
def test_attr_order_does_not_change_the_result(name: str, device: em.Device) -> None:
    spec: OpSpec = OPS[name]
    rng = np.random.default_rng(7)
    for arrays, attrs in sample_cases(spec, rng):
        if not attrs:
            continue
        attrs = runtime_attrs(spec, attrs, device)
        xs = to_tensors(arrays, device, require_grad=False)
        want = _values(run_row(spec, xs, attrs))
        backwards = dict(reversed(list(attrs.items())))
        got = _values(run_row(spec, xs, backwards))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_run_forward_passes_attrs_by_name(device: em.Device) -> None:
    # conv_transpose2d's kernel takes (stride, padding, output_padding, groups, dilation), conv2d's
    # (stride, padding, dilation, groups): the same dict, in either order, reaches both by name
    b = device.b
    rng = np.random.default_rng(3)
    x = b.from_numpy(rng.normal(size=(1, 2, 5, 5)).astype(np.float32))
    w = b.from_numpy(rng.normal(size=(2, 1, 3, 3)).astype(np.float32))
    bias = b.from_numpy(np.zeros(2, np.float32))
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (2, 2), "groups": 2}
    flipped = {"groups": 2, "dilation": (2, 2), "padding": (1, 1), "stride": (1, 1)}
    a = b.to_numpy(run_forward(b, OPS["conv2d"], (x, w, bias), attrs))
    c = b.to_numpy(run_forward(b, OPS["conv2d"], (x, w, bias), flipped))
    np.testing.assert_array_equal(a, c)
    assert a.shape == (1, 2, 3, 3)  # dilation 2, padding 1: 5 + 2 - 4 = 3 (not dilation 1's 5)
