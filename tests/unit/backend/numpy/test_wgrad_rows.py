"""The weight gradient from row-stacked x (``kernels/wgrad_rows.py``): against ember's float64
im2col kernel over the geometries it takes, at one to three threads and over several chunks;
the shapes and values it declines; the bits of its per-share sums."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, wgrad_rows
from ember.backend.numpy.kernels.im2col import _Geometry

pytest.importorskip("onnxruntime")

U = 2.0**-24  # float32's unit roundoff

# (N, C, H, W, O, kernel, stride, padding, dilation): stride 1 along the width, 16+ channels
TAKEN = [
    (4, 16, 9, 20, 5, (3, 3), (1, 1), (1, 1), (1, 1)),
    (2, 16, 12, 20, 4, (3, 3), (2, 1), (1, 1), (1, 1)),  # vertical stride
    (2, 17, 10, 30, 3, (3, 5), (1, 1), (2, 2), (1, 1)),  # a wider kernel, 17 channels
    (5, 16, 7, 40, 2, (2, 3), (3, 1), (0, 1), (2, 2)),  # dilation, no vertical padding
    (4, 16, 5, 24, 3, (3, 3), (1, 1), (0, 0), (1, 1)),  # no padding
    (3, 32, 6, 16, 8, (5, 3), (1, 1), (3, 0), (1, 1)),  # more vertical padding than kernel
    (1, 16, 3, 18, 2, (3, 3), (4, 1), (2, 1), (1, 1)),  # one image, rows read from padding
    (9, 16, 8, 17, 3, (3, 3), (1, 1), (1, 1), (1, 1)),
]


def _case(shape: tuple[Any, ...], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, c, h, w, o, k, s, p, d = shape
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    weight = np.zeros((o, c, *k), dtype=np.float32)
    out = _Geometry(x.shape, k, s, p, d).out
    g = rng.standard_normal((n, o, *out), dtype=np.float32)
    return x, weight, g


def _reference(
    g: np.ndarray, x: np.ndarray, weight: np.ndarray, geometry: tuple[Any, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The float64 weight gradient and the same of |g| and |x| (the rounding bound's scale)."""
    s, p, d = geometry
    w64 = weight.astype(np.float64)

    def wgrad(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        gw = conv._conv2d_backward(a, b, w64, s, p, d, 1, False, True, False)[1]
        assert gw is not None
        return gw

    return wgrad(g.astype(np.float64), x.astype(np.float64)), wgrad(
        np.abs(g).astype(np.float64), np.abs(x).astype(np.float64)
    )


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("shape", TAKEN)
def test_against_float64(
    shape: tuple[Any, ...], threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """|got - want| <= 8 sqrt(K) u (|g| . |x|): a K-term float32 sum's rounding of random sign
    (as in test_ort_conv), K the images times output positions."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    x, weight, g = _case(shape, 3)
    k, s, p, d = shape[5:]
    assert wgrad_rows.takes(x.shape, g.shape, k, s, d)
    got = wgrad_rows.weight_grad(g, x, k, s, p, d)
    assert got is not None and got.dtype == np.float32 and got.shape == weight.shape
    want, scale = _reference(g, x, weight, (s, p, d))
    length = g.shape[0] * g.shape[2] * g.shape[3]
    err = np.abs(got.astype(np.float64) - want)
    assert float(np.max(err - 8 * math.sqrt(length) * U * scale)) <= 0


def test_many_chunks_match_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one image each (a scratch stack far below 2 MiB) sum to the one-chunk
    result, up to the order of the float32 sums."""
    monkeypatch.setenv("EMBER_NUM_THREADS", "1")
    x, weight, g = _case((7, 16, 10, 16, 4, (3, 3), (1, 1), (1, 1), (1, 1)), 5)
    args = ((3, 3), (1, 1), (1, 1), (1, 1))
    one = wgrad_rows.weight_grad(g, x, *args)
    monkeypatch.setattr(wgrad_rows, "_CHUNK_BYTES", 1)
    many = wgrad_rows.weight_grad(g, x, *args)
    assert one is not None and many is not None
    _, scale = _reference(g, x, weight, args[1:])
    assert float(np.max(np.abs(one - many) - 8 * math.sqrt(7 * 160) * U * scale)) <= 0


@pytest.mark.parametrize(
    ("shape", "why"),
    [
        ((2, 16, 8, 16, 4, (3, 3), (1, 2), (1, 1), (1, 1)), "horizontal stride 2"),
        ((2, 8, 8, 16, 4, (3, 3), (1, 1), (1, 1), (1, 1)), "8 input channels"),
        ((2, 16, 8, 8, 4, (3, 3), (1, 1), (1, 1), (1, 1)), "2 zero columns of 10"),
        ((2, 16, 8, 16, 4, (3, 1), (1, 1), (1, 0), (1, 1)), "a one-column kernel"),
    ],
)
def test_declined_shapes(shape: tuple[Any, ...], why: str) -> None:
    x, _, g = _case(shape, 7)
    k, s, p, d = shape[5:]
    assert not wgrad_rows.takes(x.shape, g.shape, k, s, d), why
    assert wgrad_rows.weight_grad(g, x, k, s, p, d) is None, why


def test_declined_operands(monkeypatch: pytest.MonkeyPatch) -> None:
    """float64 operands and ``EMBER_CONV=numpy`` stay on ember's kernels."""
    x, _, g = _case(TAKEN[0], 9)
    args = TAKEN[0][5:]
    assert wgrad_rows.weight_grad(g.astype(np.float64), x.astype(np.float64), *args) is None
    monkeypatch.setenv("EMBER_CONV", "numpy")
    assert wgrad_rows.weight_grad(g, x, *args) is None


def test_a_non_finite_x_keeps_ember_semantics(monkeypatch: pytest.MonkeyPatch) -> None:
    """An infinity of x in the last column is read by a gradient zero column of the next tap
    (0 * inf = NaN there): the kernel declines and conv2d_backward's result is ember's im2col
    kernel's, NaN for NaN."""
    monkeypatch.setenv("EMBER_NUM_THREADS", "1")
    x, weight, g = _case((2, 16, 6, 16, 3, (3, 3), (1, 1), (1, 1), (1, 1)), 11)
    x[1, 4, 2, -1] = np.inf
    args = ((1, 1), (1, 1), (1, 1))
    assert wgrad_rows.weight_grad(g, x, (3, 3), *args) is None
    with np.errstate(invalid="ignore"):  # one thread: ember's product of inf and 0 warns
        _, got, _ = conv.conv2d_backward(g, x, weight, *args, 1, False, True)
        monkeypatch.setenv("EMBER_CONV", "numpy")
        _, want, _ = conv.conv2d_backward(g, x, weight, *args, 1, False, True)
    assert got is not None and want is not None
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.parametrize("late", ["first", "last"])
def test_share_sums_in_share_order(late: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three threads' partial sums are added in share order: the same bits when one share
    finishes last (its thread held up) as when none is."""
    monkeypatch.setenv("EMBER_NUM_THREADS", "3")
    x, _, g = _case((12, 16, 12, 16, 8, (3, 3), (1, 1), (1, 1), (1, 1)), 13)
    args = ((3, 3), (1, 1), (1, 1), (1, 1))
    want = wgrad_rows.weight_grad(g, x, *args)
    started: list[int] = []
    split = wgrad_rows.by_images

    def held(n: int, work: int, fn: Any) -> None:
        def share(lo: int, hi: int) -> None:
            started.append(lo)
            if (lo == 0) if late == "first" else (hi == n):
                time.sleep(0.05)  # this share ends after the others
            fn(lo, hi)

        split(n, work, share)

    monkeypatch.setattr(wgrad_rows, "by_images", held)
    got = wgrad_rows.weight_grad(g, x, *args)
    assert len(set(started)) == 3
    assert want is not None and got is not None
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("padding", "dilation", "output_padding"), [(0, 2, 1), (1, 2, 1), (2, 1, 0)]
)
def test_transposed_conv_weight_gradient(padding: int, dilation: int, output_padding: int) -> None:
    """A transposed conv's weight gradient is this kernel with the roles of x and the gradient
    swapped; its output padding (up to the dilation at stride 1) gives the gradient columns
    past the last window, which no tap reads."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 16, 8, 40), dtype=np.float32)
    w = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    pads, dil, extra = (padding, padding), (dilation, dilation), (output_padding,) * 2
    y = conv.conv_transpose2d(x, w, np.zeros(16, np.float32), (1, 1), pads, extra, 1, dil)
    g = rng.standard_normal(y.shape, dtype=np.float32)
    assert wgrad_rows.takes(g.shape, x.shape, (3, 3), (1, 1), dil)
    _, got, _ = conv.conv_transpose2d_backward(g, x, w, (1, 1), pads, 1, dil, False, True)

    def ember64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        args = (a, b, w.astype(np.float64), (1, 1), pads, 1, dil, False, True, False)
        gw = conv._conv_transpose2d_backward(*args)[1]
        assert gw is not None
        return gw

    want = ember64(g.astype(np.float64), x.astype(np.float64))
    scale = ember64(np.abs(g).astype(np.float64), np.abs(x).astype(np.float64))
    assert got is not None
    length = x.shape[0] * x.shape[2] * x.shape[3]
    err = np.abs(got.astype(np.float64) - want)
    assert float(np.max(err - 8 * math.sqrt(length) * U * scale)) <= 0
