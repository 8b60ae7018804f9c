"""Basic ``[]`` indexing and ``slice``: values against NumPy, gradients, and bad keys."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

KEYS: list[Any] = [
    0,
    -1,
    (1, 2),
    (2, -1, 4),
    slice(None),
    slice(1, None),
    slice(0, 3, 2),
    (slice(None), slice(1, 3)),
    (Ellipsis, 0),
    (0, Ellipsis, slice(None, None, 2)),
    (None, 1),
    (slice(None), None, 2),
    (1, None, slice(1, 4), None),
    Ellipsis,
    (slice(5, 10),),  # empty, like NumPy
    (slice(-2, None), slice(None, -1)),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_matches_numpy(device: em.Device, key: Any) -> None:
    t = em.Tensor.from_data(A, device=device)
    out = t[key]
    want = A[key]
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.to_numpy(), want)


def test_indexing_0d_result(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    assert t[1, 2, 3].shape == () and t[1, 2, 3].item() == A[1, 2, 3]


def test_slice_method(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    np.testing.assert_array_equal(t.slice([slice(0, 2), slice(1, None)]).to_numpy(), A[0:2, 1:])
    np.testing.assert_array_equal(t.slice([1]).to_numpy(), A[1])


def test_indexing_gradient_scatters_back(device: em.Device) -> None:
    x = em.Tensor.from_data(A, device=device.autodiff(), dtype=em.float64).require_grad()
    grads = (x[1, :, 1:3] * 2.0).sum().backward()
    g = x.grad(grads)
    assert g is not None
    want = np.zeros(A.shape)
    want[1, :, 1:3] = 2.0
    np.testing.assert_array_equal(g.to_numpy(), want)


def test_indexing_keeps_the_context(device: em.Device) -> None:
    x = em.Tensor.from_data(A, device=device.autodiff()).require_grad()
    y = x[0]
    assert y.is_tracked() and not y.is_require_grad()
    assert not em.Tensor.from_data(A, device=device)[0].is_autodiff()


def test_numpy_integer_keys(device: em.Device) -> None:
    t = em.Tensor.from_data(A, device=device)
    np.testing.assert_array_equal(t[np.int64(2), np.int32(1)].to_numpy(), A[2, 1])
    np.testing.assert_array_equal(t[slice(np.int64(1), np.int64(3))].to_numpy(), A[1:3])


@pytest.mark.parametrize(
    ("key", "error", "pattern"),
    [
        (3, em.ShapeError, r"index: index 3 is out of range for axis 0 of size 3"),
        ((0, -5), em.ShapeError, r"index: index -5 is out of range for axis 1"),
        ((0, 0, 0, 0), em.ShapeError, r"index: too many indices \(4\)"),
        ((Ellipsis, 0, Ellipsis), em.ShapeError, r"index: at most one \.\.\."),
        (slice(None, None, 0), em.ShapeError, r"index: slice step cannot be zero"),
        (1.5, em.DTypeError, r"index: expected ints"),
        (slice(0.5, 2), em.DTypeError, r"index: slice bounds must be ints"),
        ("a", em.DTypeError, r"index: expected ints.*got str"),
    ],
    ids=repr,
)
def test_bad_keys_raise(device: em.Device, key: Any, error: type[Exception], pattern: str) -> None:
    t = em.Tensor.from_data(A, device=device)
    with pytest.raises(error, match=pattern):
        t[key]
    np.testing.assert_array_equal(t.to_numpy(), A)
