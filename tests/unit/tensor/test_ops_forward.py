"""Every core op's forward through the Tensor API against NumPy (values, shape, dtype)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em

rng = np.random.default_rng(0)
A = rng.uniform(-2.0, 2.0, size=(3, 4)).astype(np.float32)
B = rng.uniform(-2.0, 2.0, size=(3, 4)).astype(np.float32)
P = rng.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)  # positive
R = rng.uniform(-2.0, 2.0, size=(4,)).astype(np.float32)  # broadcasts over A's rows
C3 = rng.uniform(-2.0, 2.0, size=(2, 3, 4)).astype(np.float32)
M = rng.uniform(-1.0, 1.0, size=(4, 5)).astype(np.float32)
K = np.array([[1, 5, 2, 8], [4, 4, 0, -1], [3, 2, 7, 6]], dtype=np.int64)
MASK = A > 0
_erf = np.vectorize(math.erf)

T = em.Tensor
Case = tuple[Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]

CASES: dict[str, Case] = {
    "add": (lambda x, y: x + y, np.add, (A, B)),
    "add broadcast": (lambda x, y: x.add(y), np.add, (A, R)),
    "sub": (lambda x, y: x - y, np.subtract, (A, R)),
    "mul": (lambda x, y: x.mul(y), np.multiply, (A, B)),
    "div": (lambda x, y: x / y, np.divide, (A, P)),
    "add_scalar": (lambda x: x.add_scalar(1.5), lambda a: a + np.float32(1.5), (A,)),
    "radd": (lambda x: 2 + x, lambda a: 2 + a, (A,)),
    "sub_scalar": (lambda x: x.sub_scalar(0.5), lambda a: a - np.float32(0.5), (A,)),
    "rsub": (lambda x: 1.0 - x, lambda a: np.float32(1.0) - a, (A,)),
    "mul_scalar": (lambda x: x.mul_scalar(-3.0), lambda a: a * np.float32(-3.0), (A,)),
    "rmul": (lambda x: 0.5 * x, lambda a: np.float32(0.5) * a, (A,)),
    "div_scalar": (lambda x: x.div_scalar(4.0), lambda a: a / np.float32(4.0), (A,)),
    "rdiv": (lambda x: 2.0 / x, lambda a: np.float32(2.0) / a, (P,)),
    "neg": (lambda x: -x, np.negative, (A,)),
    "neg method": (lambda x: x.neg(), np.negative, (A,)),
    "powf": (lambda x, y: x.powf(y), np.power, (P, B)),
    "pow tensor": (lambda x, y: x**y, np.power, (P, B)),
    "powf_scalar": (lambda x: x.powf_scalar(1.5), lambda a: a ** np.float32(1.5), (P,)),
    "pow float": (lambda x: x**0.5, np.sqrt, (P,)),
    "powi_scalar": (lambda x: x.powi_scalar(3), lambda a: a**3, (A,)),
    "pow int": (lambda x: x**2, np.square, (A,)),
    "powi int tensor": (lambda x: x.powi_scalar(2), np.square, (K,)),
    "rpow": (lambda x: 2.0**x, lambda a: np.float32(2.0) ** a, (A,)),
    "exp": (lambda x: x.exp(), np.exp, (A,)),
    "log": (lambda x: x.log(), np.log, (P,)),
    "log1p": (lambda x: x.log1p(), np.log1p, (P,)),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, (P,)),
    "sin": (lambda x: x.sin(), np.sin, (A,)),
    "cos": (lambda x: x.cos(), np.cos, (A,)),
    "tanh": (lambda x: x.tanh(), np.tanh, (A,)),
    "erf": (lambda x: x.erf(), lambda a: _erf(a).astype(np.float32), (A,)),
    "abs": (lambda x: x.abs(), np.abs, (A,)),
    "abs builtin": (lambda x: abs(x), np.abs, (K,)),
    "recip": (lambda x: x.recip(), np.reciprocal, (P,)),
    "sign": (lambda x: x.sign(), np.sign, (A,)),
    "clamp": (lambda x: x.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,)),
    "clamp_min": (lambda x: x.clamp_min(0.0), lambda a: np.maximum(a, 0), (A,)),
    "clamp_max": (lambda x: x.clamp(max=1.0), lambda a: np.minimum(a, 1), (A,)),
    "clamp int": (lambda x: x.clamp(0, 4), lambda a: np.clip(a, 0, 4), (K,)),
    "equal": (lambda x, y: x == y, np.equal, (K, K.T[:3, :3].repeat(2, 1)[:, :4])),
    "not_equal": (lambda x: x != 4, lambda a: a != 4, (K,)),
    "greater": (lambda x, y: x > y, np.greater, (A, B)),
    "greater_equal": (lambda x, y: x.greater_equal(y), np.greater_equal, (A, R)),
    "lower": (lambda x: x < 0.0, lambda a: a < 0, (A,)),
    "lower_equal": (lambda x, y: x <= y, np.less_equal, (A, B)),
    "equal_elem": (lambda x: x.equal_elem(4), lambda a: a == 4, (K,)),
    "greater_elem": (lambda x: x.greater_elem(1.0), lambda a: a > 1, (A,)),
    "lower_elem": (lambda x: x.lower_elem(1.0), lambda a: a < 1, (A,)),
    "invert": (lambda x: ~(x > 0.0), lambda a: ~(a > 0), (A,)),
    "and": (lambda x, y: (x > 0.0) & (y > 0.0), lambda a, c: (a > 0) & (c > 0), (A, B)),
    "or": (lambda x, y: (x > 0.0) | (y > 0.0), lambda a, c: (a > 0) | (c > 0), (A, B)),
    "sum": (lambda x: x.sum(), lambda a: np.asarray(a.sum()), (A,)),
    "sum int": (lambda x: x.sum(), lambda a: np.asarray(a.sum()), (K,)),
    "sum_dim": (lambda x: x.sum_dim(1), lambda a: a.sum(1, keepdims=True), (A,)),
    "sum_dim neg": (lambda x: x.sum_dim(-3), lambda a: a.sum(0, keepdims=True), (C3,)),
    "mean": (lambda x: x.mean(), lambda a: np.asarray(a.mean()), (A,)),
    "mean_dim": (lambda x: x.mean_dim(0), lambda a: a.mean(0, keepdims=True), (A,)),
    "max_dim": (lambda x: x.max_dim(1), lambda a: a.max(1, keepdims=True), (A,)),
    "min_dim": (lambda x: x.min_dim(0), lambda a: a.min(0, keepdims=True), (K,)),
    "argmax": (lambda x: x.argmax(1, keepdim=True), lambda a: a.argmax(1)[:, None], (A,)),
    "argmax ties": (lambda x: x.argmax(1), lambda a: a.argmax(1), (K,)),
    "argmin": (lambda x: x.argmin(0), lambda a: a.argmin(0), (A,)),
    "matmul": (lambda x, y: x @ y, np.matmul, (A, M)),
    "matmul method": (lambda x, y: x.matmul(y), np.matmul, (C3, M)),
    "matmul batch broadcast": (lambda x, y: x @ y, np.matmul, (C3[:, None], C3.transpose(0, 2, 1))),
    "matmul vector": (lambda x, y: x @ y, np.matmul, (A, R)),
    "matmul vector lhs": (lambda x, y: x @ y, np.matmul, (R, M)),
    "matmul int": (lambda x, y: x @ y, np.matmul, (K, K.T)),
    "reshape": (lambda x: x.reshape((4, 3)), lambda a: a.reshape(4, 3), (A,)),
    "reshape -1": (lambda x: x.reshape((2, -1)), lambda a: a.reshape(2, -1), (C3,)),
    "transpose": (lambda x: x.transpose(), lambda a: a.T, (A,)),
    "T": (lambda x: x.T, lambda a: a.T, (C3,)),  # PyTorch's .T: every dim reversed
    "mT": (lambda x: x.mT, lambda a: np.swapaxes(a, -1, -2), (C3,)),
    "swap_dims": (lambda x: x.swap_dims(0, 2), lambda a: np.swapaxes(a, 0, 2), (C3,)),
    "permute": (lambda x: x.permute((1, 2, 0)), lambda a: a.transpose(1, 2, 0), (C3,)),
    "permute neg": (lambda x: x.permute((-1, 0, 1)), lambda a: a.transpose(2, 0, 1), (C3,)),
    "flatten": (lambda x: x.flatten(), lambda a: a.reshape(-1), (C3,)),
    "flatten range": (lambda x: x.flatten(1, 2), lambda a: a.reshape(2, 12), (C3,)),
    "unsqueeze_dim": (lambda x: x.unsqueeze_dim(1), lambda a: a[:, None], (A,)),
    "unsqueeze_dim end": (lambda x: x.unsqueeze_dim(-1), lambda a: a[..., None], (A,)),
    "squeeze_dim": (lambda x: x.squeeze_dim(0), lambda a: a[0], (A[None],)),
    "expand": (lambda x: x.expand((2, 3, 4)), lambda a: np.broadcast_to(a, (2, 3, 4)), (R,)),
    "expand -1": (lambda x: x.expand((-1, 4)), lambda a: np.broadcast_to(a, (3, 4)), (A[:, :1],)),
    "slice": (lambda x: x.slice([slice(0, 2), slice(1, None)]), lambda a: a[0:2, 1:], (A,)),
    "slice int": (lambda x: x.slice([1]), lambda a: a[1], (A,)),
    "cat": (lambda x, y: T.cat([x, y, x], 1), lambda a, c: np.concatenate([a, c, a], 1), (A, B)),
    "cat neg": (lambda x, y: T.cat([x, y], -2), lambda a, c: np.concatenate([a, c], 0), (A, B)),
    "stack": (lambda x, y: T.stack([x, y], 0), lambda a, c: np.stack([a, c]), (A, B)),
    "stack end": (lambda x, y: T.stack([x, y], -1), lambda a, c: np.stack([a, c], -1), (A, B)),
    "mask_where": (
        lambda x, y: x.mask_where(x > 0.0, y),
        lambda a, c: np.where(a > 0, c, a),
        (A, B),
    ),
    "mask_where broadcast": (
        lambda x, y: x.mask_where(x > 0.0, y),
        lambda a, c: np.where(a > 0, c, a),
        (A, R),
    ),
    "mask_fill": (
        lambda x: x.mask_fill(x < 0.0, 0.0),
        lambda a: np.where(a < 0, np.float32(0), a),
        (A,),
    ),
    "cast": (lambda x: x.cast(em.float64), lambda a: a.astype(np.float64), (A,)),
    "cast name": (lambda x: x.cast("int32"), lambda a: a.astype(np.int32), (A,)),
    "float": (lambda x: x.float(), lambda a: a.astype(np.float32), (K,)),
    "int": (lambda x: x.int(), lambda a: a.astype(np.int64), (A,)),
    "bool": (lambda x: x.bool(), lambda a: a.astype(bool), (K,)),
    "to_device": (lambda x: x.to_device(x.device), lambda a: a, (A,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_numpy(device: em.Device, name: str) -> None:
    fn, ref, arrays = CASES[name]
    xs = [em.Tensor.from_data(a, device=device) for a in arrays]
    before = [x.to_numpy() for x in xs]
    out = fn(*xs)
    want = np.asarray(ref(*arrays))
    assert isinstance(out, em.Tensor)
    assert out.shape == want.shape, name
    assert out.dtype.name == ("bool" if want.dtype == np.bool_ else str(want.dtype)), name
    if want.dtype.kind == "f":
        np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(out.to_numpy(), want)
    for x, b in zip(xs, before):  # tensors are immutable values
        np.testing.assert_array_equal(x.to_numpy(), b)


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16, em.float64])
def test_float_dtypes_are_kept(device: em.Device, dtype: em.DType) -> None:
    x = em.Tensor.from_data(P, device=device, dtype=dtype)
    for out in (x.exp(), x * x, x.sqrt() + x, x.sum(), x.mean_dim(0), x @ x.transpose(), x / 2):
        assert out.dtype is dtype
    assert x.clamp(0.6, 1.5).dtype is dtype
    tol = 1e-12 if dtype is em.float64 else 2e-2
    got = (x * x).sum().to_numpy().astype(np.float64)
    np.testing.assert_allclose(got, float((P.astype(np.float64) ** 2).sum()), rtol=tol)


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16])
def test_python_float_keeps_half_dtypes(device: em.Device, dtype: em.DType) -> None:
    x = em.Tensor.from_data(P, device=device, dtype=dtype)
    for out in (x + 1.5, x * 0.5, 2.0 - x, 1.0 / x, x.div_scalar(3.0)):
        assert out.dtype is dtype


def test_zero_sized_tensors(device: em.Device) -> None:
    z = em.Tensor.zeros((0, 3), device=device)
    assert (z + 1.0).shape == (0, 3)
    assert z.sum().item() == 0.0
    assert z.sum_dim(0).shape == (1, 3)
    assert T.cat([z, em.Tensor.ones((2, 3), device=device)], 0).shape == (2, 3)
