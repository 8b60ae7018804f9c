"""Bad input raises the documented error type, names the op, and leaves the inputs unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em

T = em.Tensor
F = np.arange(12, dtype=np.float32).reshape(3, 4)
G = np.ones((2, 4), dtype=np.float32)
N = np.arange(12, dtype=np.int64).reshape(3, 4)

# name -> (inputs, call, error type, message pattern)
Case = tuple[tuple[np.ndarray, ...], Callable[..., Any], type[Exception], str]
CASES: dict[str, Case] = {
    # mismatched shapes
    "add shapes": (
        (F, G),
        lambda x, y: x + y,
        em.ShapeError,
        r"^add: shapes \(3, 4\) and \(2, 4\)",
    ),
    "mul shapes": ((F, G), lambda x, y: y * x, em.ShapeError, r"^mul: shapes"),
    "compare shapes": ((F, G), lambda x, y: x > y, em.ShapeError, r"^greater: shapes"),
    "matmul inner": ((F, G), lambda x, y: x @ y, em.ShapeError, r"^matmul: inner sizes differ"),
    "matmul batch": (
        (np.ones((2, 3, 4)), np.ones((3, 4, 5))),
        lambda x, y: x @ y,
        em.ShapeError,
        r"^matmul: shapes",
    ),
    "matmul 0-d": ((F,), lambda x: x @ x.sum(), em.ShapeError, r"^matmul: expected operands"),
    "cat shapes": ((F, G.T), lambda x, y: T.cat([x, y], 0), em.ShapeError, r"^cat: tensor 1"),
    "cat empty": ((F,), lambda x: T.cat([], 0), em.ShapeError, r"^cat: expected a non-empty"),
    "stack shapes": ((F, G), lambda x, y: T.stack([x, y]), em.ShapeError, r"^stack: tensor 1"),
    "mask_where shapes": (
        (F, G),
        lambda x, y: x.mask_where(x > 1.0, y),
        em.ShapeError,
        r"^mask_where: shapes",
    ),
    "expand": ((F,), lambda x: x.expand((3, 5)), em.ShapeError, r"^expand: cannot expand"),
    "expand new -1": (
        (F,),
        lambda x: x.expand((-1, 3, 4)),
        em.ShapeError,
        r"^expand: -1 keeps an existing size, but axis 0",
    ),
    "expand fewer": ((F,), lambda x: x.expand((4,)), em.ShapeError, r"^expand: target \(4,\)"),
    # out-of-range dims
    "sum_dim": ((F,), lambda x: x.sum_dim(2), em.ShapeError, r"^sum_dim: dim 2 is out of range"),
    "sum_dim 0-d": ((F,), lambda x: x.sum().sum_dim(0), em.ShapeError, r"^sum_dim: .*0-d tensor"),
    "mean_dim": ((F,), lambda x: x.mean_dim(-3), em.ShapeError, r"^mean_dim: dim -3"),
    "max_dim": ((F,), lambda x: x.max_dim(5), em.ShapeError, r"^max_dim: dim 5"),
    "argmax": ((F,), lambda x: x.argmax(2), em.ShapeError, r"^argmax: dim 2"),
    "argmin empty": (
        (np.ones((2, 0)),),
        lambda x: x.argmin(1),
        em.ShapeError,
        r"^argmin: dim 1 has size 0",
    ),
    "permute count": ((F,), lambda x: x.permute((0,)), em.ShapeError, r"^permute: expected 2"),
    "permute repeat": ((F,), lambda x: x.permute((0, 0)), em.ShapeError, r"^permute: dims"),
    "permute range": ((F,), lambda x: x.permute((0, 2)), em.ShapeError, r"^permute: dim 2"),
    "swap_dims": ((F,), lambda x: x.swap_dims(0, 2), em.ShapeError, r"^swap_dims: dim 2"),
    "transpose 1-d": ((F[0],), lambda x: x.transpose(), em.ShapeError, r"^transpose: expected"),
    "unsqueeze_dim": ((F,), lambda x: x.unsqueeze_dim(3), em.ShapeError, r"^unsqueeze_dim: dim"),
    "squeeze_dim size": (
        (F,),
        lambda x: x.squeeze_dim(0),
        em.ShapeError,
        r"^squeeze_dim: expected",
    ),
    "cat dim": ((F, F), lambda x, y: T.cat([x, y], 2), em.ShapeError, r"^cat: dim 2"),
    "stack dim": ((F, F), lambda x, y: T.stack([x, y], 3), em.ShapeError, r"^stack: dim 3"),
    "flatten order": ((F,), lambda x: x.flatten(1, 0), em.ShapeError, r"^flatten: start_dim"),
    "dim type": ((F,), lambda x: x.sum_dim(1.0), em.DTypeError, r"^sum_dim: dim must be an int"),
    # float-only ops on int tensors, arithmetic on bools
    "exp int": (
        (N,),
        lambda x: x.exp(),
        em.DTypeError,
        r"^exp: expected a float tensor, got int64",
    ),
    "log int": ((N,), lambda x: x.log(), em.DTypeError, r"^log: expected a float"),
    "sqrt int": ((N,), lambda x: x.sqrt(), em.DTypeError, r"^sqrt: expected a float"),
    "sin int": ((N,), lambda x: x.sin(), em.DTypeError, r"^sin: expected a float"),
    "tanh int": ((N,), lambda x: x.tanh(), em.DTypeError, r"^tanh: expected a float"),
    "erf int": ((N,), lambda x: x.erf(), em.DTypeError, r"^erf: expected a float"),
    "mean int": ((N,), lambda x: x.mean(), em.DTypeError, r"^mean: expected a float"),
    "powf int": ((N, N), lambda x, y: x.powf(y), em.DTypeError, r"^powf: expected a float"),
    "bool add": ((F,), lambda x: (x > 1.0) + (x > 2.0), em.DTypeError, r"^add: expected a numeric"),
    # bools sum as int64 (PyTorch's sum); the Burn sum_dim still refuses them
    "bool sum_dim": (
        (F,),
        lambda x: (x > 1.0).sum_dim(0),
        em.DTypeError,
        r"^sum_dim: expected a numeric",
    ),
    "mask dtype": (
        (F,),
        lambda x: x.mask_fill(x, 0.0),
        em.DTypeError,
        r"^mask_fill: expected a bool",
    ),
    "invert float": ((F,), lambda x: ~x, em.DTypeError, r"^~: expected a bool"),
    "scalar type": ((F,), lambda x: x + "a", em.DTypeError, r"^add_scalar: expected a Tensor"),
    "matmul operand": ((F,), lambda x: x @ [1.0], em.DTypeError, r"^matmul: expected a Tensor"),
    "powi exponent": ((F,), lambda x: x.powi_scalar(1.5), em.DTypeError, r"^powi_scalar: expected"),
    "clamp nothing": ((F,), lambda x: x.clamp(), em.ShapeError, r"^clamp: expected at least one"),
    # reshape
    "reshape count": (
        (F,),
        lambda x: x.reshape((5, 2)),
        em.ShapeError,
        r"^reshape: target \(5, 2\)",
    ),
    "reshape two -1": (
        (F,),
        lambda x: x.reshape((-1, -1)),
        em.ShapeError,
        r"^reshape: at most one",
    ),
    "reshape infer": ((F,), lambda x: x.reshape((5, -1)), em.ShapeError, r"^reshape: cannot infer"),
    "reshape negative": ((F,), lambda x: x.reshape((-2, 6)), em.ShapeError, r"^reshape: sizes"),
    # bad indices and reads
    "index range": ((F,), lambda x: x[3], em.ShapeError, r"^index: index 3 is out of range"),
    "index count": ((F,), lambda x: x[0, 0, 0], em.ShapeError, r"^index: too many indices"),
    "index type": ((F,), lambda x: x[0.5], em.DTypeError, r"^index: expected ints"),
    "item": ((F,), lambda x: x.item(), em.ShapeError, r"^item: expected a tensor with one"),
    "to_device type": ((F,), lambda x: x.to_device("cpu"), TypeError, r"^to_device: expected"),
}


def _state(t: em.Tensor) -> tuple[Any, ...]:
    return (t.to_numpy().tolist(), t.dtype, t.shape, t.is_autodiff(), t.is_tracked())


@pytest.mark.parametrize("autodiff", [False, True], ids=["plain", "autodiff"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_raises_and_leaves_inputs_unchanged(
    device: em.Device, name: str, autodiff: bool
) -> None:
    arrays, call, error, pattern = CASES[name]
    xs = [T.from_data(a, device=device.autodiff() if autodiff else device) for a in arrays]
    if autodiff:
        xs = [x.require_grad() if x.dtype.is_float else x for x in xs]
    before = [_state(x) for x in xs]
    with pytest.raises(error, match=pattern) as info:
        call(*xs)
    assert isinstance(info.value, em.EmberError) or error is TypeError
    assert [_state(x) for x in xs] == before
    if autodiff:  # a failed op records nothing: the leaves still train
        x = xs[0]
        if x.dtype.is_float:
            g = x.grad((x * 2.0).sum().backward())
            assert g is not None


def test_error_hierarchy() -> None:
    assert issubclass(em.AutodiffError, RuntimeError)
    assert issubclass(em.ShapeError, ValueError)
    assert issubclass(em.DTypeError, TypeError)
    for e in (em.AutodiffError, em.ShapeError, em.DTypeError, em.DeviceError):
        assert issubclass(e, em.EmberError)


def test_messages_carry_a_hint(device: em.Device) -> None:
    x = T.from_data(F, device=device)
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: x + T.from_data(G, device=device), "reshape or unsqueeze_dim"),
        (lambda: x.exp().int().exp(), r"\.float\(\)"),
        (lambda: x.reshape((5, 2)), "use -1"),
        (lambda: x.require_grad(), r"\.autodiff\(\)"),
        (lambda: x.sum().backward(), r"require_grad\(\)"),
    ]
    for call, hint in cases:
        with pytest.raises(em.EmberError, match=hint):
            call()
