"""Seams of dispatch: the row's precision is what amp reads, and one recorder builds every node."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import ember as em
from ember import amp
from ember._core import dispatch
from ember.ops.registry import OPS, Precision

pytest.importorskip("torch")


def test_every_row_has_a_precision_class() -> None:
    assert all(isinstance(spec.precision, Precision) for spec in OPS.values())
    low = {n for n, s in OPS.items() if s.precision is Precision.LOW}
    assert {"matmul", "linear", "conv2d", "conv_transpose2d", "attention"} <= low
    assert OPS["softmax"].precision is Precision.FULL
    assert OPS["add"].precision is Precision.FOLLOW
    assert OPS["cross_entropy"].precision is Precision.KEEP  # reads low-precision logits itself


def test_amp_names_no_ops() -> None:
    # amp reads OpSpec.precision: no string in its source is the name of a registry row
    tree = ast.parse(inspect.getsource(amp))
    strings = {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    assert not strings & set(OPS), sorted(strings & set(OPS))


def _dev() -> em.Device:
    return em.Device.torch("cpu").autodiff()


def _t(shape: tuple[int, ...], dtype: em.DType = em.float32, seed: int = 0) -> em.Tensor:
    data = np.random.default_rng(seed).normal(size=shape)
    return em.Tensor.from_data(data, device=_dev(), dtype=dtype).require_grad()


def _entry_points() -> dict[str, Any]:
    """Each dispatch entry point, called on tracked float32 tensors; the op name it records."""
    a, c = _t((3, 3), seed=1), _t((3, 3), seed=2)
    return {
        "apply": (lambda: dispatch.apply(OPS["add"], (a, c), {}), "add"),
        "apply1": (lambda: dispatch.apply1(OPS["exp"], a, {}), "exp"),
        "apply2": (lambda: dispatch.apply2(OPS["mul"], a, c), "mul"),
        "binary": (lambda: a - c, "sub"),
        "scalar": (lambda: a * 2.0, "mul_scalar"),
        "record": (lambda: a.to_device(em.Device.cpu()), "to_device"),
        "matmul fast path": (lambda: a @ c, "matmul"),
    }


@pytest.mark.parametrize("entry", sorted(_entry_points()))
def test_every_entry_point_records_through_the_one_recorder(
    entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = dispatch._record

    def spy(spec: Any, *args: Any) -> Any:
        seen.append(spec.name)
        return real(spec, *args)

    monkeypatch.setattr(dispatch, "_record", spy)
    call, name = _entry_points()[entry]
    y = call()
    assert seen == [name]
    assert y._node is not None and y._node.spec.name == name


def _full(name: str) -> Any:
    return replace(OPS[name], precision=Precision.FULL)


def test_autocast_applies_at_every_entry_point() -> None:
    # under autocast each entry point casts as its row's precision says: LOW rows compute in
    # bfloat16, FULL rows bring bfloat16 operands up to float32, FOLLOW rows lower a bias
    x32, w32 = _t((4, 4), seed=3), _t((4, 4), seed=4)
    x16 = x32.cast(em.bfloat16)
    bias = _t((4,), seed=5)
    with amp.autocast(em.bfloat16):
        results = {
            "matmul fast path": (x32 @ w32, em.bfloat16),
            "apply2": (dispatch.apply2(OPS["matmul"], x32, w32), em.bfloat16),
            "apply": (dispatch.apply(OPS["matmul"], (x32, w32), {}), em.bfloat16),
            "apply1": (dispatch.apply1(OPS["softmax"], x16, {"dim": -1}), em.float32),
            "binary": (x16 + bias, em.bfloat16),
            "scalar": (dispatch.scalar(_full("mul_scalar"), x16, 2.0), em.float32),
            "apply1 (any row)": (dispatch.apply1(_full("exp"), x16, {}), em.float32),
        }
    for entry, (y, want) in results.items():
        assert y.dtype is want, entry
    # outside autocast the same calls keep their operands' dtypes
    assert (x32 @ w32).dtype is em.float32
    assert dispatch.scalar(_full("mul_scalar"), x16, 2.0).dtype is em.bfloat16
    assert dispatch.autocast_policy() is None
