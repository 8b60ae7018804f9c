"""Dispatch consults the autocast policy exactly once per op, fast paths included."""

from __future__ import annotations

from typing import Any

import ember as em
from ember import amp


class _Counting(amp.Policy):
    def __init__(self) -> None:
        super().__init__(em.bfloat16)
        self.calls: list[str] = []

    def __call__(self, spec: Any, xs: Any) -> Any:
        if spec.name != "cast":  # the policy's own casts dispatch too
            self.calls.append(spec.name)
        return super().__call__(spec, xs)


def _ones(shape: tuple[int, ...]) -> em.Tensor:
    return em.Tensor.ones(shape, device=em.Device.cpu())


def test_two_d_matmul_fast_path_follows_the_policy() -> None:
    x, w = _ones((2, 3)), _ones((3, 4))
    policy = _Counting()
    with amp.autocast(policy):
        y = x @ w
    assert y.dtype is em.bfloat16
    assert policy.calls == ["matmul"]
    assert (x @ w).dtype is em.float32  # outside autocast the fast path runs as before


def test_binary_op_consults_the_policy_once() -> None:
    a = _ones((4, 3)).cast(em.bfloat16)
    bias = _ones((3,))
    policy = _Counting()
    with amp.autocast(policy):
        y = a + bias
    assert y.dtype is em.bfloat16  # the smaller float32 operand joined the low-precision one
    assert policy.calls == ["add"]
