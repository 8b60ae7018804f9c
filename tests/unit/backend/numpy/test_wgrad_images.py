"""conv2d's few-tap weight gradient, one product per image (``wgrad_images``): against a float64
sum over the windows, the same bits at any thread count and chunk size, non-finite inputs
placed as the exact sum places them, transposed convolutions through it."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, wgrad_images

Pair = tuple[int, int]


def _exact(g: np.ndarray, x: np.ndarray, k: Pair, s: Pair, p: Pair, d: Pair) -> np.ndarray:
    """dW[o, c, a, b] = sum over n, i, j of g[n, o, i, j] * xpad[n, c, s i + d a, s j + d b]."""
    g64, xp = (
        g.astype(np.float64),
        np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1]))),
    )
    ho, wo = g.shape[2:]
    out = np.zeros((g.shape[1], x.shape[1], *k))
    for a in range(k[0]):
        for b in range(k[1]):
            r0, c0 = d[0] * a, d[1] * b
            win = xp[
                :, :, r0 : r0 + s[0] * (ho - 1) + 1 : s[0], c0 : c0 + s[1] * (wo - 1) + 1 : s[1]
            ]
            with np.errstate(invalid="ignore"):
                out[:, :, a, b] = np.einsum("noij,ncij->oc", g64, win)
    return out


def _bound(g: np.ndarray, x: np.ndarray, k: Pair, s: Pair, p: Pair, d: Pair) -> np.ndarray:
    """A float32 sum's error bound per weight: 2 (terms) eps times the sum of |terms|."""
    terms = g.shape[0] * g.shape[2] * g.shape[3]
    scale = _exact(np.abs(g), np.abs(x), k, s, p, d)
    return 2 * terms * float(np.finfo(np.float32).eps) * scale + 1e-30


# (N, C, O, H, W, k, stride, padding, dilation): the CNN's, LeNet's, ResNet's and DCGAN's first
# layers, and odd geometries
CASES = [
    (64, 1, 32, 28, 28, (3, 3), (1, 1), (1, 1), (1, 1)),
    (16, 1, 6, 32, 32, (5, 5), (1, 1), (0, 0), (1, 1)),
    (8, 3, 16, 32, 32, (3, 3), (1, 1), (1, 1), (1, 1)),
    (8, 1, 32, 32, 32, (4, 4), (2, 2), (1, 1), (1, 1)),
    (3, 2, 5, 11, 9, (3, 2), (2, 1), (1, 0), (2, 1)),
    (1, 3, 4, 7, 12, (1, 3), (1, 3), (0, 1), (1, 2)),
    (2, 8, 3, 6, 6, (2, 2), (1, 1), (0, 0), (1, 1)),
]


def _case(i: int) -> tuple[np.ndarray, np.ndarray, Pair, Pair, Pair, Pair]:
    n, c, o, h, w, k, s, p, d = CASES[i]
    ho = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    wo = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    rng = np.random.default_rng(40 + i)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    g = rng.standard_normal((n, o, ho, wo), dtype=np.float32)
    return g, x, k, s, p, d


@pytest.mark.parametrize("i", range(len(CASES)))
def test_matches_the_exact_sum(i: int) -> None:
    g, x, k, s, p, d = _case(i)
    assert wgrad_images.takes(x.shape, k, 1)
    got = wgrad_images.weight_grad(g, x, k, s, p, d)
    want = _exact(g, x, k, s, p, d)
    assert got is not None and got.dtype == np.float32 and got.shape == want.shape
    assert np.all(np.abs(got - want) <= _bound(g, x, k, s, p, d))


@pytest.mark.parametrize("i", [0, 4])
def test_same_bits_for_any_thread_count_and_chunk(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    g, x, k, s, p, d = _case(i)
    runs = []
    for threads, chunk in (("1", 1 << 20), ("2", 1 << 20), ("3", 1 << 20), ("2", 4096)):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        monkeypatch.setattr(wgrad_images, "_CHUNK_BYTES", chunk)
        runs.append(wgrad_images.weight_grad(g, x, k, s, p, d))
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_non_finite_x_reaches_only_the_weights_it_feeds(value: float) -> None:
    g, x, k, s, p, d = _case(2)
    x[1, 0, 5, 31] = value  # the last column (im2col's flat junk columns wrap onto it)
    with np.errstate(invalid="ignore", over="ignore"):
        got = wgrad_images.weight_grad(g, x, k, s, p, d)
    want = _exact(g, x, k, s, p, d)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert np.isfinite(want).sum() > want.size // 2  # most weights never meet the value
    fin = np.isfinite(want)
    with np.errstate(invalid="ignore"):
        bound = _bound(g, x, k, s, p, d)
    assert np.all(np.abs(got[fin] - want[fin]) <= bound[fin])


def test_float64_and_the_empty_batch() -> None:
    g, x, k, s, p, d = _case(4)
    got = wgrad_images.weight_grad(g.astype(np.float64), x.astype(np.float64), k, s, p, d)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _exact(g, x, k, s, p, d), rtol=1e-12, atol=1e-12)
    empty = wgrad_images.weight_grad(g[:0], x[:0], k, s, p, d)
    assert empty.shape == (g.shape[1], x.shape[1], *k) and not empty.any()


def test_takes_first_layers_only() -> None:
    assert wgrad_images.takes((8, 3, 32, 32), (3, 3), 1)  # 27 taps
    assert wgrad_images.takes((8, 2, 32, 32), (4, 4), 1)  # 32
    assert not wgrad_images.takes((8, 4, 32, 32), (3, 3), 1)  # 36
    assert not wgrad_images.takes((8, 2, 32, 32), (3, 3), 2)  # grouped


@pytest.mark.parametrize("route", ["ort", "numpy"])
def test_conv_backward_takes_it_on_both_routes(route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if route == "numpy":
        monkeypatch.setenv("EMBER_CONV", "numpy")
    calls = []
    real = wgrad_images.weight_grad
    monkeypatch.setattr(wgrad_images, "weight_grad", lambda *a: calls.append(1) or real(*a))
    g, x, k, s, p, d = _case(0)
    w = np.ones((g.shape[1], x.shape[1], *k), np.float32)
    gx, gw, gb = conv.conv2d_backward(g, x, w, s, p, d, 1, True, True)
    assert calls == [1] and gx is not None and gw is not None and gb is not None
    np.testing.assert_array_equal(gw, real(g, x, k, s, p, d))
    assert gx.shape == x.shape


@pytest.mark.parametrize("output_padding", [0, 1])
def test_transposed_conv_weight_gradient(output_padding: int) -> None:
    """conv_transpose2d's weight gradient is conv2d's with x and grad swapped; with output
    padding grad has windows past x's last row, which count as zero."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8, 5, 5), dtype=np.float32)  # (N, C_in, H, W)
    w = rng.standard_normal((8, 1, 4, 4), dtype=np.float32)  # 1 output channel: 16 taps
    s, p, d = (2, 2), (1, 1), (1, 1)
    y = conv.conv_transpose2d(x, w, np.zeros(1, np.float32), s, p, (output_padding,) * 2, 1, d)
    g = rng.standard_normal(y.shape, dtype=np.float32)
    _, gw, _ = conv.conv_transpose2d_backward(g, x, w, s, p, 1, d, False, True)
    out = (g.shape[2] + 2 - 4) // 2 + 1
    xg = np.pad(x, ((0, 0), (0, 0), (0, out - 5), (0, out - 5)))
    want = _exact(xg, g, (4, 4), s, p, d)  # (C_in, 1, 4, 4): x as the output gradient
    assert gw is not None and gw.shape == w.shape
    assert np.all(np.abs(gw - want) <= _bound(xg, g, (4, 4), s, p, d))
