"""The MLAS route of the NumPy weight-gradient product (``kernels/ort_gemm.py``): results against
float64 NumPy, the shapes the rule takes and their orientation, the opt-out, float64 left on
OpenBLAS, run-to-run bit equality, and conv weight gradients through the route against ember's
float64 kernels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, ort_conv, ort_gemm
from ember.backend.numpy.kernels.threads import _serial

pytest.importorskip("onnxruntime")

U = 2.0**-24  # float32's unit roundoff


def _tol(got: np.ndarray, want: np.ndarray, scale: np.ndarray, length: int) -> None:
    """|got - want| <= 8 sqrt(L) u (|a| @ |b|^T) elementwise: an L-term float32 dot product's
    rounding errors of random sign grow as sqrt(L) u sum |a_i b_i| (Higham's probabilistic
    bound), ``scale`` that sum in float64."""
    assert got.shape == want.shape and got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want)
    worst = float(np.max(err - 8 * math.sqrt(length) * U * scale, initial=0.0))
    assert worst <= 0, f"error above the bound by {worst:.3g} (L={length})"


class Spy:
    """Records the (rows, cols, length) and thread count of each MLAS product the route runs
    (one per group, from any thread)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[tuple[int, int, int], int]] = []
        self.convs: list[Any] = []  # the builders of every other session (ORT's own convs)
        session = ort_conv._session

        def spy(build: Any, args: tuple[int, int, int], threads: int) -> Any:
            if build is ort_gemm._gemm_nt:  # the products, not the convolutions' own sessions
                self.calls.append((args, threads))
            else:
                self.convs.append(build)
            return session(build, args, threads)

        monkeypatch.setattr(ort_conv, "_session", spy)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    monkeypatch.delenv("EMBER_CONV", raising=False)
    return Spy(monkeypatch)


def _operands(g: int, m: int, n: int, length: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((g, m, length), dtype=np.float32)
    b = rng.standard_normal((g, n, length), dtype=np.float32)
    return a, b


def _nt64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.float64), b.astype(np.float64).transpose(0, 2, 1))


# (G, M, N, L): the weight gradients of bench/numpy_models.py's ResNet, LeNet and cnn steps (per
# chunk and whole), a grouped one, both orientations
SHAPES = [
    (1, 16, 27, 34816),
    (1, 16, 144, 3264),
    (1, 6, 25, 20608),
    (1, 32, 9, 53760),
    (1, 64, 288, 6720),
    (2, 8, 18, 1000),
    (1, 2, 2, 256),
    (1, 3, 40, 777),
]


@pytest.mark.parametrize("where", ["1", "2", "share"])
def test_product_matches_float64(spy: Spy, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "1" if where == "1" else "2")
    monkeypatch.setattr(_serial, "on", where == "share", raising=False)
    for i, (g, m, n, length) in enumerate(SHAPES):
        a, b = _operands(g, m, n, length, seed=i)
        got = ort_gemm.matmul_nt(a, b)
        assert got is not None and got.shape == (g, m, n)
        _tol(got, _nt64(a, b), _nt64(abs(a), abs(b)), length)
        # conv.py's product is the same one
        np.testing.assert_array_equal(conv._matmul_nt(a, b), got)
    # one run per group, for each of the two products; MLAS's own threads only inside no share
    # and from _THREAD_CELLS output cells (64 x 288 here)
    want = [
        1 if where == "share" or m * n < ort_gemm._THREAD_CELLS else int(where)
        for g, m, n, _ in SHAPES
        for _ in range(2 * g)
    ]
    assert [t for _, t in spy.calls] == want
    assert where != "2" or 2 in want


def test_rule_and_orientation(spy: Spy) -> None:
    """M as MLAS's columns unless M leaves a larger share of a 16-column block empty than N."""
    cases = {
        (16, 144, 300): (144, 16),  # equal shares: M as the columns (b @ a^T)
        (16, 27, 300): (27, 16),
        (32, 9, 300): (9, 32),
        (6, 25, 300): (6, 25),  # 10 of 16 empty against 7 of 32: N as the columns
        (1, 2048, 300): None,  # a single row: OpenBLAS
        (9, 1, 300): None,
        (16, 144, 255): None,  # too short
    }
    for (m, n, length), want in cases.items():
        spy.calls.clear()
        a, b = _operands(1, m, n, length, seed=m + n)
        got = ort_gemm.matmul_nt(a, b)
        assert (got is not None) == (want is not None) == ort_gemm.takes(m, n, length)
        assert [args for args, _ in spy.calls] == ([] if want is None else [(*want, length)])


def test_float64_mixed_and_empty_stay_on_openblas(spy: Spy) -> None:
    a, b = _operands(1, 16, 27, 1000, seed=0)
    assert ort_gemm.matmul_nt(a.astype(np.float64), b.astype(np.float64)) is None
    assert ort_gemm.matmul_nt(a, b.astype(np.float64)) is None
    assert ort_gemm.matmul_nt(a[:0], b[:0]) is None
    np.testing.assert_allclose(conv._matmul_nt(a.astype(np.float64), b), _nt64(a, b), rtol=1e-5)
    assert not spy.calls


def test_opt_out(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_CONV", "numpy")
    a, b = _operands(1, 16, 27, 1000, seed=0)
    assert ort_gemm.matmul_nt(a, b) is None
    _tol(conv._matmul_nt(a, b), _nt64(a, b), _nt64(abs(a), abs(b)), 1000)
    assert not spy.calls


# ------------------------------------------------------------------------------ conv gradients
def _conv_case(
    n: int, c: int, o: int, size: int, k: int, p: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, size, size), dtype=np.float32)
    w = rng.standard_normal((o, c, k, k), dtype=np.float32)
    out = size + 2 * p - k + 1
    g = rng.standard_normal((n, o, out, out), dtype=np.float32)
    return x, w, g


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(np.float64) for a in arrays]


# (N, C, O, H, k, p): ResNet's 16 -> 16 layer (32x32, batch 32), an 8-channel 3x3 and a
# 2-channel 5x5; grids above 256 positions, which ort_conv leaves to these kernels (first
# layers of at most 32 taps take wgrad_images instead)
CONVS = [(32, 16, 16, 32, 3, 1), (16, 8, 16, 24, 3, 1), (16, 2, 6, 32, 5, 0)]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_conv_weight_grad_through_the_route(
    spy: Spy, threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    one = (1, 1)
    for i, (n, c, o, h, k, p) in enumerate(CONVS):
        spy.calls.clear()
        x, w, g = _conv_case(n, c, o, h, k, p, seed=i)
        x64, w64, g64 = _f64(x, w, g)
        _, gw, _ = conv.conv2d_backward(g, x, w, one, (p, p), one, 1, False, True)
        _, want, _ = conv.conv2d_backward(g64, x64, w64, one, (p, p), one, 1, False, True)
        _, scale, _ = conv.conv2d_backward(
            abs(g64), abs(x64), w64, one, (p, p), one, 1, False, True
        )
        assert gw is not None and want is not None and scale is not None
        _tol(gw, want, scale, n * g.shape[2] * g.shape[3])
        # chunked: one MLAS thread per pool share
        assert spy.calls and {t for _, t in spy.calls} == {1}
        again = conv.conv2d_backward(g, x, w, one, (p, p), one, 1, False, True)[1]
        np.testing.assert_array_equal(again, gw)


def test_transposed_weight_grad_through_the_route(
    spy: Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conv_transpose2d's weight gradient is conv2d's with x and grad swapped (a 32x32 grid).

    Which ORT form takes it follows the NCHWc block: with 16 (AVX-512) the 8 swapped channels
    do not fit and the MLAS product runs; with 8 (AVX2) ORT's swapped-axes conv does."""
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 16, 16, 16), dtype=np.float32)
    w = rng.standard_normal((16, 8, 4, 4), dtype=np.float32)
    g = rng.standard_normal((8, 8, 32, 32), dtype=np.float32)
    st, pd, one = (2, 2), (1, 1), (1, 1)
    x64, w64, g64 = _f64(x, w, g)
    gw = conv.conv_transpose2d_backward(g, x, w, st, pd, 1, one, False, True)[1]
    want = conv.conv_transpose2d_backward(g64, x64, w64, st, pd, 1, one, False, True)[1]
    scale = conv.conv_transpose2d_backward(abs(g64), abs(x64), w64, st, pd, 1, one, False, True)[1]
    assert gw is not None and want is not None and scale is not None
    _tol(gw, want, scale, 8 * 16 * 16)
    if ort_conv._block == 8:
        assert not spy.calls and spy.convs
    else:
        assert spy.calls


@pytest.mark.parametrize(("value", "threads"), [(np.inf, "1"), (-np.inf, "1"), (np.nan, "2")])
def test_nonfinite_x_as_ember(
    spy: Spy, value: float, threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-finite x in a flat column's junk part reaches only the weights it feeds: the same
    NaN / inf places as the float64 kernel (conv.py computes a non-finite result again without
    junk, on the route too)."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    x, w, g = _conv_case(4, 4, 16, 16, 3, 1, seed=9)  # 36 taps: the MLAS products
    x[1, 0, 5, 15] = value  # the last column: the flat layout's junk columns wrap onto it
    one = (1, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        gw = conv.conv2d_backward(g, x, w, one, one, one, 1, False, True)[1]
        want = conv.conv2d_backward(*_f64(g, x, w), one, one, one, 1, False, True)[1]
    assert gw is not None and want is not None and spy.calls
    np.testing.assert_array_equal(np.isnan(gw), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(gw), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(gw[fin], want[fin], rtol=1e-4, atol=1e-3)
