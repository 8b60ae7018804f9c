"""``padding="same"`` of F.conv2d / F.conv1d when dilation * (kernel - 1) is odd (even kernels,
odd dilation): the extra row / column goes at the bottom / right, as PyTorch. Values and the
input, weight and bias gradients against torch in float64, on every backend (this package's
conftest)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch.nn.functional as TF

import ember as em
from ember.nn import functional as F

from .compare import check

# torch says its own "same" with an odd total copies the input; the reference is still exact
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")

CONV2D_SAME = [
    ((2, 3, 6, 7), (4, 3, 2, 2), {}),  # even kernel both ways
    ((2, 3, 6, 7), (4, 3, 4, 3), {}),  # even in height only
    ((1, 2, 5, 8), (3, 2, 3, 2), {"dilation": 3}),  # odd dilation, even width: total 3
    ((2, 4, 7, 7), (4, 2, 2, 4), {"dilation": (1, 3), "groups": 2}),
    ((3, 6, 5), (2, 3, 2, 2), {}),  # unbatched
    ((2, 2, 3, 3), (2, 2, 4, 4), {}),  # kernel larger than the input
]


@pytest.mark.parametrize(("xs", "ws", "kw"), CONV2D_SAME)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv2d_same_odd_total(
    xs: Any, ws: Any, kw: dict[str, Any], with_bias: bool, node_seed: int
) -> None:
    rng = np.random.default_rng(node_seed)
    x, w, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=(ws[0],))
    if with_bias:
        check(
            lambda x, w, b: F.conv2d(x, w, b, padding="same", **kw),
            lambda x, w, b: TF.conv2d(x, w, b, padding="same", **kw),
            x,
            w,
            b,
        )
    else:
        check(
            lambda x, w: F.conv2d(x, w, padding="same", **kw),
            lambda x, w: TF.conv2d(x, w, padding="same", **kw),
            x,
            w,
        )


CONV1D_SAME = [
    ((2, 3, 9), (4, 3, 2), {}),
    ((2, 3, 9), (4, 3, 4), {"dilation": 3}),
    ((1, 4, 6), (2, 2, 2), {"groups": 2}),
    ((3, 7), (2, 3, 6), {}),  # unbatched
]


@pytest.mark.parametrize(("xs", "ws", "kw"), CONV1D_SAME)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv1d_same_odd_total(
    xs: Any, ws: Any, kw: dict[str, Any], with_bias: bool, node_seed: int
) -> None:
    rng = np.random.default_rng(node_seed)
    x, w, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=(ws[0],))
    if with_bias:
        check(
            lambda x, w, b: F.conv1d(x, w, b, padding="same", **kw),
            lambda x, w, b: TF.conv1d(x, w, b, padding="same", **kw),
            x,
            w,
            b,
        )
    else:
        check(
            lambda x, w: F.conv1d(x, w, padding="same", **kw),
            lambda x, w: TF.conv1d(x, w, padding="same", **kw),
            x,
            w,
        )


def test_same_output_keeps_the_spatial_shape() -> None:
    x = em.Tensor.zeros((1, 2, 5, 6), dtype=em.float64)
    y = F.conv2d(x, em.Tensor.zeros((3, 2, 2, 4), dtype=em.float64), padding="same", dilation=3)
    assert y.shape == (1, 3, 5, 6)
    z = F.conv1d(x[0, :, 0], em.Tensor.zeros((3, 2, 4), dtype=em.float64), padding="same")
    assert z.shape == (3, 6)


@pytest.mark.parametrize("fn", ["conv2d", "conv1d"])
def test_same_with_stride_is_refused(fn: str) -> None:
    if fn == "conv2d":
        x, w = em.Tensor.zeros((1, 2, 6, 6)), em.Tensor.zeros((3, 2, 2, 2))
        with pytest.raises(em.ShapeError, match="conv2d: padding='same' needs stride 1"):
            F.conv2d(x, w, stride=2, padding="same")
    else:
        x, w = em.Tensor.zeros((1, 2, 6)), em.Tensor.zeros((3, 2, 2))
        with pytest.raises(em.ShapeError, match="conv1d: padding='same' needs stride 1"):
            F.conv1d(x, w, stride=2, padding="same")
