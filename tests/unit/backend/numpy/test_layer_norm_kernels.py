"""The NumPy layer-norm kernels on (R, C) rows: forward and fused backward against a float64
reference, both row-sum paths (short and long rows), several normalised dims, and the decline
to the row's rule on non-finite statistics."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels import norm


def _reference(
    x: np.ndarray, g: np.ndarray, w: np.ndarray, b: np.ndarray, k: int, eps: float
) -> tuple[np.ndarray, ...]:
    x, g, w, b = (a.astype(np.float64) for a in (x, g, w, b))
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    n = int(np.prod(x.shape[x.ndim - k :]))
    xc = x - x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt((xc**2).mean(axis=axes, keepdims=True) + eps)
    xhat = xc * rstd
    gh = g * w
    gx = (gh - gh.sum(axis=axes, keepdims=True) / n) * rstd - xhat * rstd * (
        (gh * xhat).sum(axis=axes, keepdims=True) / n
    )
    return xhat * w + b, gx, (g * xhat).sum(axis=lead), g.sum(axis=lead)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("shape", "k"), [((16, 64, 128), 1), ((7, 5), 1), ((3, 4, 6, 10), 2), ((2, 300), 1)]
)
def test_kernels_match_float64(dtype: type, shape: tuple[int, ...], k: int) -> None:
    rng = np.random.default_rng(17)
    x = rng.normal(loc=3.0, scale=2.0, size=shape).astype(dtype)
    g = rng.normal(size=shape).astype(dtype)
    w = rng.normal(size=shape[-k:]).astype(dtype)
    b = rng.normal(size=shape[-k:]).astype(dtype)
    y = norm.layer_norm(x, w, b, k, 1e-5)
    back = norm.layer_norm_backward(g, x, w, b, k, 1e-5)
    assert not isinstance(back, type(NotImplemented))
    # float sums of n values: about sqrt(n) ulps on the statistics, carried into each output
    n = int(np.prod(shape[-k:]))
    rows = x.size // n
    for got, ref, count in zip((y, *back), _reference(x, g, w, b, k, 1e-5), (n, n, rows, rows)):
        assert got.shape == ref.shape and got.dtype == dtype
        tol = 16 * np.sqrt(max(n, count)) * np.finfo(dtype).eps
        np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.abs(ref).max())


def test_non_finite_statistics_decline_to_the_rule() -> None:
    x = np.random.default_rng(2).normal(size=(4, 40)).astype(np.float32)
    x[1, 3] = np.inf
    w, b = np.ones(40, np.float32), np.zeros(40, np.float32)
    with np.errstate(invalid="ignore"):
        back = norm.layer_norm_backward(np.ones_like(x), x, w, b, 1, 1e-5)
    assert back is NotImplemented


def test_other_shapes_and_dtypes_take_the_generic_path() -> None:
    x = np.ones((2, 3, 4), np.float16)
    w, b = np.ones(4, np.float16), np.zeros(4, np.float16)
    assert norm.layer_norm_backward(x, x, w, b, 1, 1e-5) is NotImplemented
    y = norm.layer_norm(x, w, b, 1, 1e-5)
    assert y.dtype == np.float16 and y.shape == x.shape and not y.any()
    # a weight broadcast from fewer dims than the normalised ones: the generic path
    x32 = np.random.default_rng(1).normal(size=(3, 4, 5)).astype(np.float32)
    w1, b1 = np.ones(5, np.float32), np.zeros(5, np.float32)
    got = norm.layer_norm(x32, w1, b1, 2, 1e-5)
    ref = _reference(x32, x32, np.ones((4, 5)), np.zeros((4, 5)), 2, 1e-5)[0]
    np.testing.assert_allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize("width", [8, 128])
def test_a_rows_result_does_not_depend_on_the_batch(width: int) -> None:
    """Each row's output and input gradient have the same bits in a batch of 13 rows and alone."""
    rng = np.random.default_rng(23)
    x = rng.normal(loc=1.0, size=(13, width)).astype(np.float32)
    g = rng.normal(size=x.shape).astype(np.float32)
    w, b = rng.normal(size=width).astype(np.float32), rng.normal(size=width).astype(np.float32)
    y, back = norm.layer_norm(x, w, b, 1, 1e-5), norm.layer_norm_backward(g, x, w, b, 1, 1e-5)
    assert not isinstance(back, type(NotImplemented))
    for i in range(13):
        alone = norm.layer_norm_backward(g[i : i + 1].copy(), x[i : i + 1].copy(), w, b, 1, 1e-5)
        assert not isinstance(alone, type(NotImplemented))
        np.testing.assert_array_equal(y[i : i + 1], norm.layer_norm(x[i : i + 1], w, b, 1, 1e-5))
        np.testing.assert_array_equal(back[0][i : i + 1], alone[0])


def test_a_weight_of_another_shape_is_not_read_as_the_rows() -> None:
    """A (5, 4) weight for x (..., 4, 5) has the rows' size but not their shape: the fused
    kernels leave it to the generic path (which broadcasts or refuses), never reshape it."""
    x = np.random.default_rng(4).normal(size=(2, 4, 5)).astype(np.float32)
    w, b = np.ones((5, 4), np.float32), np.zeros((5, 4), np.float32)
    assert norm._norm_rows(x, w, b, 2) is None
    assert norm.layer_norm_backward(x, x, w, b, 2, 1e-5) is NotImplemented
