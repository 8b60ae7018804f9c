"""Convolutions whose one window covers the whole input (``kernels/conv_dense.py``): the
forward and both gradients of such a conv2d and of its adjoint, a transposed conv of a 1 x 1
input, against PyTorch in float64, and the shapes that do not take the route."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, conv_dense

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _close(got: np.ndarray | None, want: torch.Tensor, terms: int) -> None:
    """|got - want| within 8 sqrt(K) u of the largest |want| (K: the terms of each sum)."""
    assert got is not None
    ref = want.detach().numpy()
    u = 2.0**-24 if got.dtype == np.float32 else 2.0**-53
    scale = float(np.abs(ref).max()) + 1.0
    np.testing.assert_allclose(got, ref, rtol=0, atol=8 * np.sqrt(terms) * u * scale * 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("c", "o", "hw", "s"), [(128, 1, 4, 1), (3, 5, 7, 2), (2, 4, 1, 1)])
def test_conv2d_one_window(dtype: type, c: int, o: int, hw: int, s: int) -> None:
    rng = np.random.default_rng(c + o + hw)
    x = rng.standard_normal((6, c, hw, hw)).astype(dtype)
    w = rng.standard_normal((o, c, hw, hw)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    assert conv_dense.covers(x.shape, (hw, hw), (0, 0), (1, 1))
    tx, tw, tb = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
    ty = F.conv2d(tx, tw, tb, s)
    y = conv.conv2d(x, w, b, (s, s), (0, 0), (1, 1), 1)
    assert y.shape == tuple(ty.shape) == (6, o, 1, 1) and y.dtype == dtype
    _close(y, ty, c * hw * hw)
    g = rng.standard_normal(y.shape).astype(dtype)
    ty.backward(torch.tensor(g.astype(np.float64)))
    gx, gw, gb = conv.conv2d_backward(g, x, w, (s, s), (0, 0), (1, 1), 1, True, True)
    assert tx.grad is not None and tw.grad is not None and tb.grad is not None
    _close(gx, tx.grad, o)
    _close(gw, tw.grad, 6)
    _close(gb, tb.grad, 6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("cin", "cout", "k", "s"), [(64, 128, 4, 1), (3, 5, 3, 2)])
def test_conv_transpose2d_one_window(dtype: type, cin: int, cout: int, k: int, s: int) -> None:
    rng = np.random.default_rng(cin + cout + k)
    x = rng.standard_normal((6, cin, 1, 1)).astype(dtype)
    w = rng.standard_normal((cin, cout, k, k)).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype)
    assert conv_dense.covers_transposed(x.shape, (0, 0), (1, 1))
    tx, tw, tb = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
    ty = F.conv_transpose2d(tx, tw, tb, s)
    y = conv.conv_transpose2d(x, w, b, (s, s), (0, 0), (0, 0), 1, (1, 1))
    assert y.shape == tuple(ty.shape) == (6, cout, k, k) and y.dtype == dtype
    _close(y, ty, cin)
    g = rng.standard_normal(y.shape).astype(dtype)
    ty.backward(torch.tensor(g.astype(np.float64)))
    gx, gw, gb = conv.conv_transpose2d_backward(g, x, w, (s, s), (0, 0), 1, (1, 1), True, True)
    assert tx.grad is not None and tw.grad is not None and tb.grad is not None
    _close(gx, tx.grad, cout * k * k)
    _close(gw, tw.grad, 6)
    _close(gb, tb.grad, 6 * k * k)


def test_the_rule() -> None:
    assert not conv_dense.covers((2, 3, 4, 4), (4, 4), (1, 1), (1, 1))  # padding: more windows
    assert not conv_dense.covers((2, 3, 4, 5), (4, 4), (0, 0), (1, 1))  # a narrower kernel
    assert not conv_dense.covers_transposed((2, 3, 1, 2), (0, 0), (1, 1))
    assert not conv_dense.covers_transposed((2, 3, 1, 1), (1, 1), (1, 1))


def test_output_padding_keeps_the_general_kernel() -> None:
    """A 1 x 1 input with output padding writes past the kernel: not one window, and the
    general kernels give PyTorch's result."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 1, 1))
    w = rng.standard_normal((3, 4, 3, 3))
    b = np.zeros(4)
    y = conv.conv_transpose2d(x, w, b, (2, 2), (0, 0), (1, 1), 1, (1, 1))
    ty = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), None, 2, 0, 1)
    assert y.shape == (2, 4, 4, 4)
    np.testing.assert_allclose(y, ty.numpy(), rtol=0, atol=1e-12)
    g = rng.standard_normal(y.shape)
    gx, gw, _ = conv.conv_transpose2d_backward(g, x, w, (2, 2), (0, 0), 1, (1, 1), True, True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    F.conv_transpose2d(tx, tw, None, 2, 0, 1).backward(torch.tensor(g))
    assert tx.grad is not None and tw.grad is not None and gx is not None and gw is not None
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=0, atol=1e-12)
