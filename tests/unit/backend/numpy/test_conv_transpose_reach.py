"""conv_transpose2d whose output padding reaches past the stride (PyTorch allows it below the
dilation): the adjoint conv of its output has more positions than x, which feed nothing."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv as C

torch = pytest.importorskip("torch")

CASES = [  # stride, dilation, output padding, kernel, padding
    (1, 2, 1, 3, 0),
    (1, 3, 2, 3, 1),
    (2, 3, 2, 3, 1),
    (1, 2, 1, 2, 0),
]


@pytest.mark.parametrize("route", ["numpy", "default"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(
    monkeypatch: pytest.MonkeyPatch, case: tuple[int, ...], dtype: type, route: str
) -> None:
    if route == "numpy":
        monkeypatch.setenv("EMBER_CONV", "numpy")
    s, d, op, k, p = case
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 5, 4)).astype(dtype)
    w = rng.standard_normal((3, 2, k, k)).astype(dtype)
    b = rng.standard_normal(2).astype(dtype)
    y = C.conv_transpose2d(x, w, b, (s, s), (p, p), (op, op), 1, (d, d))
    tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    ty = torch.nn.functional.conv_transpose2d(tx, tw, tb, s, p, op, 1, d)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.from_numpy(g))
    gx, gw, gb = C.conv_transpose2d_backward(g, x, w, (s, s), (p, p), 1, (d, d), True, True, True)
    # sums of at most 3 * 2 * k * k (y, gx) or 2 * 7 * 9 products (gw) of unit normals
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for got, ref in ((y, ty), (gx, tx.grad), (gw, tw.grad), (gb, tb.grad)):
        assert got is not None
        want = ref.detach().numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))
