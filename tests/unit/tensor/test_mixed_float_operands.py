"""Mixed float operands: in-kernel promotion for elementwise rows, one dtype for fused rows.

``add/sub/mul/div`` of two float dtypes record no ``cast`` node (the kernel promotes), and each
input still gets its gradient in its own dtype, equal to what the cast-then-op graph gives.
``linear`` and ``matmul`` under autocast take a low-precision activation and a float32 weight
straight to the compute dtype (no float32 round trip of the activation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember import amp


def _names(t: em.Tensor) -> list[str]:
    """Op names of every node behind ``t`` (leaves excluded)."""
    out, seen, stack = [], set(), [t._node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if n.spec is not None:
            out.append(n.spec.name)
        stack.extend(n.parents)
    return out


def _pair(device: em.Device, rng: np.random.Generator) -> tuple[em.Tensor, em.Tensor]:
    ad = device.autodiff()
    a = em.tensor(rng.normal(size=(3, 4)).astype(np.float32), device=ad).require_grad()
    c = em.tensor(rng.normal(size=(4,)) + 2.0, device=ad).cast(em.bfloat16).detach().require_grad()
    return a, c


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_mixed_elementwise_records_no_cast(op: str, device: em.Device, rng: Any) -> None:
    a, c = _pair(device, rng)
    fn = {"add": em.Tensor.add, "sub": em.Tensor.sub, "mul": em.Tensor.mul, "div": em.Tensor.div}
    y = fn[op](a, c)
    assert y.dtype is em.float32
    assert _names(y) == [op]
    yr = fn[op](c, a)  # either operand order
    assert yr.dtype is em.float32 and _names(yr) == [op]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_mixed_elementwise_gradients_match_the_cast_graph(
    op: str, device: em.Device, rng: Any
) -> None:
    a, c = _pair(device, rng)
    fn = {"add": em.Tensor.add, "sub": em.Tensor.sub, "mul": em.Tensor.mul, "div": em.Tensor.div}
    g = fn[op](a, c).sum().backward()
    ga, gc = a.grad(g), c.grad(g)
    assert ga is not None and gc is not None
    assert ga.dtype is em.float32 and gc.dtype is em.bfloat16  # each in its input's dtype
    # reference: the explicit promotion graph (a cast node, then the same-dtype op)
    a2 = a.detach().require_grad()
    c2 = c.detach().require_grad()
    g2 = fn[op](a2, c2.cast(em.float32)).sum().backward()
    np.testing.assert_array_equal(ga.to_numpy(), a2.grad(g2).to_numpy())
    np.testing.assert_array_equal(
        gc.cast(em.float32).to_numpy(), c2.grad(g2).cast(em.float32).to_numpy()
    )


def test_mixed_add_is_exact_under_balanced(device: em.Device, rng: Any) -> None:
    """The recomputed forward of a mixed row promotes the same way: Balanced == Disabled."""
    grads = []
    data = rng.normal(size=(5, 4)).astype(np.float32)
    for dev in (device.autodiff(), device.autodiff().gradient_checkpointing()):
        x = em.tensor(data, device=dev).require_grad()
        h = (x.cast(em.bfloat16) * 2.0).exp()  # bf16 branch
        y = (x + h).tanh() * x  # mixed add, then memory-bound ops that need it recomputed
        g = y.sum().backward()
        grads.append(x.grad(g).to_numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_integer_and_float_operands_still_cast(device: em.Device) -> None:
    """Only float pairs take the in-kernel path; an int operand is cast as before."""
    x = em.Tensor.ones((3,), device=device.autodiff()).require_grad()
    i = em.Tensor.ones((3,), dtype=em.int32, device=device)
    y = x + i
    assert y.dtype is em.float32
    assert y.sum().backward() is not None


def test_linear_under_autocast_takes_a_bf16_activation_directly(device: em.Device) -> None:
    ad = device.autodiff()
    x = em.Tensor.ones((2, 3, 4), device=ad).cast(em.bfloat16).detach().require_grad()
    layer = em.nn.Linear(4, 5, device=ad)
    with amp.autocast(em.bfloat16):
        y = layer(x)
    assert y.dtype is em.bfloat16
    names = _names(y)
    assert names.count("linear") == 1 and "matmul" not in names
    # the weight and bias are cast to bf16; the bf16 activation is not cast at all
    assert names.count("cast") == 2
    g = y.sum().backward()
    gw = layer.weight.val().grad(g)
    assert gw is not None and gw.dtype is em.float32
    assert x.grad(g).dtype is em.bfloat16


def test_linear_promotes_mixed_operands_outside_autocast(device: em.Device) -> None:
    x = em.Tensor.ones((2, 4), device=device).cast(em.bfloat16)
    w = em.Tensor.ones((5, 4), device=device)
    y = em.nn.functional.linear(x, w)
    assert y.dtype is em.float32
    np.testing.assert_allclose(y.to_numpy(), np.full((2, 5), 4.0))
    yb = em.nn.functional.linear(x, w, em.Tensor.ones((5,), device=device))
    assert yb.dtype is em.float32
    np.testing.assert_allclose(yb.to_numpy(), np.full((2, 5), 5.0))


def test_batched_matmul_under_autocast_casts_each_operand_once(device: em.Device) -> None:
    ad = device.autodiff()
    a = em.Tensor.ones((2, 3, 4), device=ad).cast(em.bfloat16).detach().require_grad()
    w = em.Tensor.ones((4, 5), device=ad).require_grad()
    with amp.autocast(em.bfloat16):
        y = a @ w
    assert y.dtype is em.bfloat16
    assert sorted(_names(y)) == ["cast", "matmul"]  # the float32 weight's cast, nothing else
