"""Bad arguments to the pooling functions: a clear EmberError naming the op, what was expected and
what was received (issue 19's options and max unpooling)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em
from ember.errors import DTypeError, EmberError, ShapeError
from ember.nn import functional as F

from .compare import dev


def _x(*shape: int) -> em.Tensor:
    return em.tensor(np.random.default_rng(0).normal(size=shape), device=dev())


def _pooled() -> tuple[em.Tensor, em.Tensor]:
    return F.max_pool2d(_x(1, 2, 4, 4), 2, return_indices=True)


CASES: list[tuple[str, Callable[[], Any], type[EmberError], str]] = [
    ("max_pool2d", lambda: F.max_pool2d(_x(1, 1, 4, 4), 2, ceil_mode="yes"), DTypeError,
     "ceil_mode"),
    ("max_pool2d", lambda: F.max_pool2d(_x(1, 1, 4, 4), 2, return_indices=1), DTypeError,
     "return_indices"),
    ("avg_pool2d", lambda: F.avg_pool2d(_x(1, 1, 4, 4), 2, count_include_pad=None), DTypeError,
     "count_include_pad"),
    ("avg_pool2d", lambda: F.avg_pool2d(_x(1, 1, 4, 4), 2, divisor_override=0), ShapeError,
     "nonzero divisor_override"),
    ("avg_pool2d", lambda: F.avg_pool2d(_x(1, 1, 4, 4), 2, divisor_override=2.5), DTypeError,
     "divisor_override"),
    ("max_pool2d", lambda: F.max_pool2d(_x(1, 1, 4, 4), 2, padding=2), ShapeError,
     "at most half the kernel"),
    ("avg_pool1d", lambda: F.avg_pool1d(_x(1, 1, 4), 3, padding=2), ShapeError,
     "at most half the kernel"),
    ("max_pool2d", lambda: F.max_pool2d(_x(1, 1, 1, 1), 2), ShapeError, "ceil_mode=True"),
    ("max_pool1d", lambda: F.max_pool1d(_x(1, 1, 2), 2, dilation=3, ceil_mode=True), ShapeError,
     "at least one window"),
    ("max_pool2d", lambda: F.max_pool2d(_x(1, 1, 1, 4), (2, 3), (2, 3), (1, 0), (2, 1)),
     ShapeError, "only padding"),
    ("max_pool1d", lambda: F.max_pool1d(_x(1, 1, 6), (2, 2)), ShapeError, "1-tuple"),
    ("max_pool1d", lambda: F.max_pool1d(_x(1, 1, 6, 6), 2), ShapeError, "(N, C, L)"),
    ("avg_pool2d", lambda: F.avg_pool2d(_x(1, 1, 6, 6), 2, stride=0), ShapeError, "stride >= 1"),
    ("max_unpool2d", lambda: F.max_unpool2d(_pooled()[0], _pooled()[0], 2), DTypeError,
     "int64 indices"),
    ("max_unpool2d", lambda: F.max_unpool2d(_x(1, 2, 2, 3), _pooled()[1], 2), ShapeError,
     "indices of the input's shape"),
    ("max_unpool2d", lambda: F.max_unpool2d(*_pooled(), 2, output_size=(6, 4)), ShapeError,
     "within a stride"),
    ("max_unpool2d", lambda: F.max_unpool2d(*_pooled(), 2, output_size=(1, 4, 4)), ShapeError,
     "2 or 4 entries"),
    ("max_unpool2d", lambda: F.max_unpool2d(*_pooled(), 2, output_size=4), DTypeError,
     "sequence of 2 ints"),
    ("max_unpool1d", lambda: F.max_unpool1d(_x(1, 1, 3), em.tensor([[[0, 1, 7]]], device=dev()),
                                            2), ShapeError, "index 7 is out of range"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "call", "kind", "says"), CASES, ids=[c[3] for c in CASES])
def test_bad_argument(op: str, call: Callable[[], Any], kind: type[EmberError], says: str) -> None:
    if "out of range" in says and dev().is_cuda:
        pytest.skip("CUDA leaves the index check to the kernel")
    with pytest.raises(kind) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"{op}: expected") or msg.startswith(f"{op}: index"), msg
    assert says in msg, msg
