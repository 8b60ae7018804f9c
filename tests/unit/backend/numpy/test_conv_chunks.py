"""The image-chunked NumPy convolution kernels against PyTorch and the whole-batch kernels."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, conv_chunks

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (x shape, weight shape (O, C/G, kh, kw), stride, padding, dilation, groups)
CASES = [
    ((5, 4, 16, 16), (6, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # flat columns with junk
    ((7, 6, 13, 11), (6, 3, 3, 2), (2, 1), (1, 2), (2, 1), 2),  # strides, dilation, groups
    ((5, 3, 9, 9), (4, 3, 5, 5), (1, 1), (2, 2), (1, 1), 1),
    ((6, 4, 8, 8), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),  # depthwise
    ((3, 2, 7, 7), (4, 2, 1, 1), (2, 2), (0, 0), (1, 1), 1),  # 1x1, stride 2
    ((4, 3, 12, 10), (5, 3, 4, 4), (2, 2), (1, 1), (1, 1), 1),  # DCGAN-like 4x4 stride 2
]
IDS = ["flat", "strided_dilated_groups", "5x5", "depthwise", "1x1_s2", "4x4_s2"]
TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.fixture(params=["whole", "one_image", "three_images"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The kernels' path: whole-batch columns, or chunks of one or of three images (ember's
    own kernels: the ONNX Runtime route is off)."""
    monkeypatch.setenv("EMBER_CONV", "numpy")
    if request.param == "whole":
        monkeypatch.setattr(conv, "chunked", lambda n, work: False)
    else:
        monkeypatch.setattr(conv, "chunked", lambda n, work: True)
        per = 1 if request.param == "one_image" else 3
        monkeypatch.setattr(conv_chunks, "_images_per_chunk", lambda geo, c, item: per)
    return str(request.param)


def _close(got: Any, want: Any, dtype: type) -> None:
    want = want.detach().numpy()
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL[dtype] * scale)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv2d_forward_backward(
    case: Any, dtype: type, threads: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    xs, ws, st, pd, dl, gr = case
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=xs).astype(dtype), rng.normal(size=ws).astype(dtype)
    b = rng.normal(size=ws[0]).astype(dtype)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = TF.conv2d(tx, tw, tb, st, pd, dl, gr)
    g = rng.normal(size=tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    y = conv.conv2d(x, w, b, st, pd, dl, gr)
    assert y.dtype == dtype
    _close(y, ty, dtype)
    gx, gw, gb = conv.conv2d_backward(g, x, w, st, pd, dl, gr, True, True)
    _close(gx, tx.grad, dtype)
    _close(gw, tw.grad, dtype)
    _close(gb, tb.grad, dtype)
    only_x = conv.conv2d_backward(g, x, w, st, pd, dl, gr, True, False)
    only_w = conv.conv2d_backward(g, x, w, st, pd, dl, gr, False, True)
    assert only_x[1] is None and only_w[0] is None
    _close(only_x[0], tx.grad, dtype)
    _close(only_w[1], tw.grad, dtype)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_transpose2d_forward_backward(
    case: Any, dtype: type, threads: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    xs, ws, st, pd, dl, gr = case
    rng = np.random.default_rng(1)
    x = rng.normal(size=xs).astype(dtype)
    w = rng.normal(size=(xs[1], ws[0] // gr, ws[2], ws[3])).astype(dtype)  # (C_in, C_out/G, ..)
    b = rng.normal(size=w.shape[1] * gr).astype(dtype)
    op = (st[0] - 1, 0)  # an output padding where the stride allows one
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = TF.conv_transpose2d(tx, tw, torch.tensor(b), st, pd, op, gr, dl)
    g = rng.normal(size=tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    y = conv.conv_transpose2d(x, w, b, st, pd, op, gr, dl)
    _close(y, ty, dtype)
    gx, gw, _ = conv.conv_transpose2d_backward(g, x, w, st, pd, gr, dl, True, True)
    _close(gx, tx.grad, dtype)
    _close(gw, tw.grad, dtype)


@pytest.mark.parametrize("route", ["numpy", "ort"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bias_gradient_only_when_asked_for(
    case: Any, route: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """need_bias=False gives None for the bias and the same x and weight gradients, on every
    path (float32 on the ONNX Runtime route too, where onnxruntime is installed)."""
    if route == "ort":
        monkeypatch.delenv("EMBER_CONV")
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    xs, ws, st, pd, dl, gr = case
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=xs).astype(np.float32), rng.normal(size=ws).astype(np.float32)
    g = conv.conv2d(x, w, np.zeros(ws[0], np.float32), st, pd, dl, gr)  # y's shape
    # conv2d's gradients, and those of the transposed conv from g's shape back to x's (by w)
    for fn, out in (
        (lambda *need: conv.conv2d_backward(g, x, w, st, pd, dl, gr, *need), g),
        (lambda *need: conv.conv_transpose2d_backward(x, g, w, st, pd, gr, dl, *need), x),
    ):
        for need in ((True, True), (True, False), (False, True), (False, False)):
            full, bare = fn(*need, True), fn(*need, False)
            assert bare[2] is None and full[2] is not None
            np.testing.assert_allclose(full[2], out.sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-4)
            for a, b in zip(full[:2], bare[:2]):
                assert (a is None) == (b is None)
                if a is not None:
                    np.testing.assert_array_equal(a, b)


def test_chunked_weight_gradient_with_inf_in_a_junk_column(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an inf in x's last column reaches the flat layout's junk columns; PyTorch's weight
    # gradient is inf/NaN only where a real output meets it
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 2, 6, 6))
    x[1, 0, 2, 5] = np.inf
    w = rng.normal(size=(3, 2, 3, 3))
    g = rng.normal(size=(4, 3, 6, 6))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    TF.conv2d(tx, tw, None, 1, 1).backward(torch.tensor(g))
    with np.errstate(invalid="ignore", over="ignore"):
        _, gw, _ = conv.conv2d_backward(g, x, w, (1, 1), (1, 1), (1, 1), 1, False, True)
    want = tw.grad.numpy()
    assert gw is not None
    np.testing.assert_array_equal(np.isnan(gw), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(gw), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(gw[fin], want[fin], rtol=1e-12, atol=1e-12)


def test_chunks_cover_every_image_once() -> None:
    ch = conv_chunks.Chunks((11, 3, 8, 8), (3, 3), (1, 1), (1, 1), (1, 1), 4)
    ch.per = 4
    spans = ch.each(2, 11)
    assert [(s, e) for s, e, _ in spans] == [(2, 6), (6, 10), (10, 11)]
    assert [g.shape[0] for _, _, g in spans] == [4, 4, 1]


@pytest.mark.parametrize("late", ["first", "last"])
def test_weight_gradient_sums_do_not_depend_on_which_share_ends_first(
    late: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three threads, three per-share weight-gradient sums: they are added in share order, so
    the bits are the same when one share finishes last (its thread held up) as when none is."""
    monkeypatch.setenv("EMBER_CONV", "numpy")
    monkeypatch.setenv("EMBER_NUM_THREADS", "3")
    rng = np.random.default_rng(21)
    x = rng.standard_normal((12, 8, 16, 16), dtype=np.float32)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    g = rng.standard_normal((12, 16, 16, 16), dtype=np.float32)
    t = rng.standard_normal((12, 16, 14, 14), dtype=np.float32)  # transposed conv -> x's shape
    a = rng.standard_normal((1, 8, 1 << 15))  # float64: OpenBLAS's long-product partial sums
    b = rng.standard_normal((1, 16, 1 << 15))

    def run() -> list[np.ndarray]:
        _, gw, _ = conv.conv2d_backward(g, x, w, (1, 1), (1, 1), (1, 1), 1, False, True)
        _, tw, _ = conv.conv_transpose2d_backward(x, t, w, (1, 1), (0, 0), 1, (1, 1), False, True)
        assert gw is not None and tw is not None
        return [gw, tw, conv._matmul_nt(a, b)]

    want = run()
    started: list[int] = []

    def held(split: Any) -> Any:
        def wrapped(n: int, work: int, fn: Any, *rest: Any) -> None:
            def share(lo: int, hi: int) -> None:
                started.append(lo)
                if (lo == 0) if late == "first" else (hi == n):
                    time.sleep(0.05)  # this share ends after the others
                fn(lo, hi)

            split(n, work, share, *rest)

        return wrapped

    monkeypatch.setattr(conv, "by_images", held(conv.by_images))
    monkeypatch.setattr(conv, "_parallel_split", held(conv._parallel_split))
    got = run()
    assert len(set(started)) >= 3  # three shares each time
    for a_, e in zip(got, want, strict=True):
        np.testing.assert_array_equal(a_, e)
