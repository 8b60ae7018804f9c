"""dtype promotion, as the README's "Dtypes and promotion" documents it."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

f16, bf16, f32, f64 = em.float16, em.bfloat16, em.float32, em.float64
i32, i64, b = em.int32, em.int64, em.bool

TENSOR_TABLE = [
    # two tensors of one dtype keep it
    (f16, f16, f16),
    (bf16, bf16, bf16),
    (f32, f32, f32),
    (i32, i32, i32),
    # two floats give the wider; float16 with bfloat16 gives float32
    (f16, f32, f32),
    (bf16, f64, f64),
    (f32, f64, f64),
    (f16, bf16, f32),
    # int with float gives the float
    (i64, f16, f16),
    (i32, f32, f32),
    (i64, f64, f64),
    (i64, bf16, bf16),
    # int32 with int64 gives int64; bool joins anything as that thing
    (i32, i64, i64),
    (b, i32, i32),
    (b, f16, f16),
    (b, f64, f64),
]


@pytest.mark.parametrize(("x", "y", "want"), TENSOR_TABLE, ids=lambda d: d.name)
def test_tensor_tensor_promotion(
    device: em.Device, x: em.DType, y: em.DType, want: em.DType
) -> None:
    a = em.Tensor.from_data([1, 0, 1], device=device, dtype=x)
    c = em.Tensor.from_data([1, 1, 0], device=device, dtype=y)
    for out in (a * c, c * a):
        assert out.dtype is want
    if not (x is b and y is b):
        np.testing.assert_array_equal((a + c).to_numpy().astype(np.float64), [2.0, 1.0, 1.0])


@pytest.mark.parametrize(
    ("x", "value", "want"),
    [
        (f32, 2, f32),
        (f16, 2.5, f16),
        (bf16, 3, bf16),
        (f64, 0.5, f64),
        (i64, 2, i64),
        (i32, 3, i32),
        (i64, 2.5, f32),  # a Python float lifts an int tensor to float32
        (i32, 0.5, f32),
        (b, 1, i64),
        (b, 1.5, f32),
    ],
    ids=str,
)
def test_python_scalar_never_upcasts(
    device: em.Device, x: em.DType, value: float, want: em.DType
) -> None:
    t = em.Tensor.from_data([1, 0], device=device, dtype=x)
    for out in (t + value, value + t, t * value, value * t, t - value):
        assert out.dtype is want
    np.testing.assert_allclose((t * value).to_numpy().astype(np.float64), [value, 0.0])


def test_true_division_of_ints_gives_float32(device: em.Device) -> None:
    a = em.Tensor.from_data([1, 3], device=device)
    c = em.Tensor.from_data([2, 4], device=device, dtype=em.int32)
    for out in (a / c, a / 2, 3 / a):
        assert out.dtype is em.float32
    np.testing.assert_allclose((a / c).to_numpy(), [0.5, 0.75])
    np.testing.assert_allclose((3 / a).to_numpy(), [3.0, 1.0])


def test_bool_arithmetic_is_rejected(device: em.Device) -> None:
    m = em.Tensor.from_data([True, False], device=device)
    with pytest.raises(em.DTypeError, match=r"add.*bool"):
        _ = m + m


def test_comparisons_give_bool(device: em.Device) -> None:
    a = em.Tensor.from_data([1, 2], device=device, dtype=em.int32)
    c = em.Tensor.from_data([1.5, 1.5], device=device, dtype=em.float16)
    assert (a > c).dtype is em.bool and (a > c).tolist() == [False, True]
    assert (a == 2).tolist() == [False, True]


def test_promotion_under_autodiff_keeps_gradients_in_the_leaf_dtype(device: em.Device) -> None:
    x = em.Tensor.from_data([1.0, 2.0], device=device.autodiff(), dtype=em.float16).require_grad()
    y = em.Tensor.from_data([3.0, 4.0], device=device, dtype=em.float64)
    out = x * y
    assert out.dtype is em.float64
    g = x.grad(out.sum().backward())
    assert g is not None and g.dtype is em.float16
    np.testing.assert_array_equal(g.to_numpy().astype(np.float64), [3.0, 4.0])


@pytest.mark.parametrize(
    ("x", "value", "want"),
    [
        (f32, np.float64(2.0), f32),
        (f16, np.float64(0.5), f16),
        (f32, np.float32(2.0), f32),
        (i32, np.int64(3), i32),
        (i64, np.float64(0.5), f32),
        (b, np.bool_(True), b),
    ],
    ids=str,
)
def test_numpy_scalars_behave_like_python_scalars(
    device: em.Device, x: em.DType, value: object, want: em.DType
) -> None:
    t = em.Tensor.from_data([1, 0], device=device, dtype=x)
    outs = [t == value, value == t] if x is b else [t + value, value * t, t - value]
    for out in outs:
        assert out.dtype is (b if x is b else want)


def test_unsupported_scalars_raise(device: em.Device) -> None:
    t = em.Tensor.from_data([1.0], device=device)
    for bad in (1j, "2", None):
        with pytest.raises(em.DTypeError, match="add_scalar: expected a Tensor or a Python number"):
            _ = t + bad
