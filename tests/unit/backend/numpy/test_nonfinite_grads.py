"""Non-finite upstream gradients through the masked backward kernels (ReLU's and max
pooling's): a position the mask drops gets zero, as in PyTorch, not NaN from inf * 0 or
NaN * 0; positions the mask keeps pass the value on."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.backend import NumpyBackend as B

torch = pytest.importorskip("torch")

SPECIALS = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)


def _grad(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Seeded normal values with an inf, a -inf and a NaN in each of several places."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(shape, dtype=np.float32)
    flat = g.reshape(-1)
    spots = rng.choice(flat.size, size=min(flat.size, 12), replace=False)
    flat[spots] = np.resize(SPECIALS, spots.size)
    return g


def test_relu_backward() -> None:
    rng = np.random.default_rng(0)
    out = np.maximum(rng.standard_normal((4, 50), dtype=np.float32), 0)
    out[0, :3] = np.nan  # a NaN output passes its gradient on
    g = _grad(out.shape, 1)
    got = B.relu_backward(g, out)
    want = torch.ops.aten.threshold_backward(torch.from_numpy(g), torch.from_numpy(out), 0)
    np.testing.assert_array_equal(got, want.numpy())
    # a dropped negative gradient is +0, as PyTorch's (a multiply by a 0 mask gives -0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want.numpy()))


@pytest.mark.parametrize("specials", [False, True])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_backward_dtypes_and_negative_nan(dtype: type, specials: bool) -> None:
    """Every float width takes the bitwise select; a NaN output with its sign bit set (x86's
    default NaN) passes its gradient on, -0 and 0 outputs drop theirs, as +0 (with finite
    gradients too)."""
    rng = np.random.default_rng(4)
    out = np.maximum(rng.standard_normal((3, 40)), 0).astype(dtype)
    out[0, :2] = -np.float64("nan")  # sign bit set
    out[1, :2] = -0.0
    g = _grad(out.shape, 5) if specials else rng.standard_normal(out.shape)
    g = g.astype(dtype)
    got = B.relu_backward(g, out)
    want = torch.ops.aten.threshold_backward(torch.from_numpy(g), torch.from_numpy(out), 0)
    assert got.dtype == g.dtype
    np.testing.assert_array_equal(got, want.numpy())
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want.numpy()))


@pytest.mark.parametrize(
    ("kernel", "stride", "padding"),
    [((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 2), (1, 1)), ((3, 3), (1, 1), (1, 1))],
)
def test_max_pool2d_backward(
    kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int]
) -> None:
    rng = np.random.default_rng(2)
    x = np.maximum(rng.standard_normal((2, 3, 8, 8), dtype=np.float32), 0)  # ties at zero
    tx = torch.from_numpy(x).requires_grad_(True)
    ty = torch.nn.functional.max_pool2d(tx, kernel, stride, padding)
    g = _grad(tuple(ty.shape), 3)
    ty.backward(torch.from_numpy(g))
    got = B.max_pool2d_backward(g, x, kernel, stride, padding, (1, 1))
    assert tx.grad is not None
    want = tx.grad.numpy()
    for where in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(where(got), where(want))
    # overlapping windows sum up to kh*kw gradients into an input, in another order than
    # PyTorch's: each sum's rounding is at most taps * u * (taps * max |g|), u = 2^-24
    taps = kernel[0] * kernel[1]
    fin = np.isfinite(want)
    bound = taps * 2.0**-24 * taps * float(np.abs(g[np.isfinite(g)]).max())
    np.testing.assert_allclose(got[fin], want[fin], rtol=0, atol=bound)
    if stride == kernel:  # disjoint windows: each input takes one gradient, the very value
        np.testing.assert_array_equal(got, want)
