"""conv2d's input gradient as a forward convolution of the output gradient (stride 1), against
PyTorch and against the column-scatter path it replaces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv
from tests.helpers.tolerance import assert_channel_sums

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (x shape, weight shape (O, C/G, kh, kw), padding, dilation, groups): stride 1, O <= C
CASES = [
    ((4, 6, 12, 12), (6, 6, 3, 3), (1, 1), (1, 1), 1),  # ResNet-like, flat columns
    ((3, 8, 9, 11), (4, 4, 3, 3), (1, 0), (2, 1), 2),  # groups, dilation, uneven padding
    ((2, 4, 10, 10), (4, 1, 3, 3), (1, 1), (1, 1), 4),  # depthwise
    ((3, 6, 14, 14), (5, 6, 5, 5), (0, 0), (1, 1), 1),  # no padding: the full correlation
    ((2, 5, 7, 7), (5, 5, 1, 1), (0, 0), (1, 1), 1),  # 1x1
]
IDS = ["resnet", "groups_dilated", "depthwise", "5x5_valid", "1x1"]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _data(case: Any, dtype: type) -> tuple[np.ndarray, ...]:
    xs, ws, pd, dl, gr = case
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=xs).astype(dtype), rng.normal(size=ws).astype(dtype)
    y = conv.conv2d(x, w, np.zeros(ws[0], dtype), (1, 1), pd, dl, gr)
    return x, w, rng.normal(size=y.shape).astype(dtype)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_input_grad_by_conv_matches_torch(
    case: Any, dtype: type, threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    monkeypatch.setenv("EMBER_CONV", "numpy")  # ember's kernels, not the ONNX Runtime route
    _, _, pd, dl, gr = case
    x, w, g = _data(case, dtype)
    assert conv._input_grad_by_conv(g, w, (1, 1), pd, dl, gr) is not None  # the path is taken
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    TF.conv2d(tx, tw, None, 1, pd, dl, gr).backward(torch.tensor(g))
    gx, gw, gb = conv.conv2d_backward(g, x, w, (1, 1), pd, dl, gr, True, True)
    for got, want in ((gx, tx.grad), (gw, tw.grad)):
        assert got is not None and want is not None
        scale = max(1.0, float(want.abs().max()))
        np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=TOL[dtype] * scale)
    assert_channel_sums(gb, g)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_input_grad_by_conv_matches_scatter(case: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, pd, dl, gr = case
    x, w, g = _data(case, np.float64)
    new = conv.conv2d_backward(g, x, w, (1, 1), pd, dl, gr, True, False)[0]
    monkeypatch.setattr(conv, "_input_grad_by_conv", lambda *a: None)
    old = conv.conv2d_backward(g, x, w, (1, 1), pd, dl, gr, True, False)[0]
    np.testing.assert_allclose(new, old, rtol=0, atol=1e-12 * float(np.abs(old).max()))


def test_declined_where_scatter_is_the_way() -> None:
    """Strided, more output than input channels, padding beyond the kernel, a non-finite
    weight: the column scatter runs (the last one keeps PyTorch's inf/NaN placement)."""
    rng = np.random.default_rng(2)
    g = rng.normal(size=(2, 4, 6, 6))
    w = rng.normal(size=(4, 4, 3, 3))
    assert conv._input_grad_by_conv(g, w, (2, 2), (1, 1), (1, 1), 1) is None
    assert (
        conv._input_grad_by_conv(g, rng.normal(size=(4, 2, 3, 3)), (1, 1), (1, 1), (1, 1), 1)
        is None
    )
    assert conv._input_grad_by_conv(g, w, (1, 1), (3, 3), (1, 1), 1) is None
    w[0, 0, 1, 1] = np.inf
    assert conv._input_grad_by_conv(g, w, (1, 1), (1, 1), (1, 1), 1) is None


def test_nonfinite_weight_input_grad_as_torch() -> None:
    x = np.random.default_rng(3).normal(size=(2, 3, 6, 6))
    w = np.random.default_rng(4).normal(size=(3, 3, 3, 3))
    w[1, 2, 0, 0] = np.inf
    g = np.ones((2, 3, 6, 6))
    tx = torch.tensor(x, requires_grad=True)
    TF.conv2d(tx, torch.tensor(w), None, 1, 1).backward(torch.tensor(g))
    with np.errstate(invalid="ignore"):  # the scatter path's junk columns meet the inf
        gx = conv.conv2d_backward(g, x, w, (1, 1), (1, 1), (1, 1), 1, True, False)[0]
    np.testing.assert_array_equal(np.isnan(gx), torch.isnan(tx.grad).numpy())
    np.testing.assert_array_equal(np.isinf(gx), torch.isinf(tx.grad).numpy())
