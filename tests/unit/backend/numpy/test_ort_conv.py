"""The ONNX Runtime route of the NumPy conv kernels (``kernels/ort_conv.py``): results against
ember's own float64 kernels over a seeded sweep of shapes, the forms the rule picks, and the
cases that stay on ember's kernels."""

from __future__ import annotations

import math
import sys
import threading
from collections import Counter
from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, ort_conv, wgrad_images, wgrad_rows
from ember.backend.numpy.kernels import threads as pool
from tests.helpers.tolerance import assert_channel_sums

pytest.importorskip("onnxruntime")

U = 2.0**-24  # float32's unit roundoff


def _tol(got: np.ndarray, want: np.ndarray, scale: np.ndarray, length: int) -> None:
    """|got - want| <= 8 sqrt(K) u (|a| . |b|) elementwise: a K-term float32 dot product's
    rounding errors of random sign grow as sqrt(K) u sum |a_i b_i| (Higham's probabilistic
    bound), with ``scale`` that sum (the same convolution of the absolute values, float64)."""
    assert got.shape == want.shape and got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want)
    bound = 8 * math.sqrt(length) * U * scale  # this CPU's worst is 1.4 sqrt(K) u
    worst = float(np.max(err - bound, initial=0.0))
    assert worst <= 0, f"error above the bound by {worst:.3g} (K={length})"


class Spy:
    """Counts the ORT graphs run (by builder name, and ``wgrad_rows`` for a weight gradient from
    row-stacked x), the float32 ORT forms declined (by function: ember's kernel then runs) and
    ember's backward kernels (``wgrad_images`` for a few-tap weight gradient per image)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ort: Counter[str] = Counter()
        self.declined: Counter[str] = Counter()
        self.ember: Counter[str] = Counter()
        run = ort_conv._run

        def spy_run(build: Any, args: Any, feeds: Any, threads: int) -> Any:
            out = run(build, args, feeds, threads)
            if out is not None:
                self.ort[build.__name__] += 1
            return out

        monkeypatch.setattr(ort_conv, "_run", spy_run)
        rows = wgrad_rows.weight_grad

        def spy_rows(*args: Any) -> Any:
            out = rows(*args)
            if out is not None:
                self.ort["wgrad_rows"] += 1
            return out

        monkeypatch.setattr(wgrad_rows, "weight_grad", spy_rows)
        images = wgrad_images.weight_grad

        def spy_images(*args: Any) -> Any:
            out = images(*args)
            if out is not None:
                self.ember["wgrad_images"] += 1
            return out

        monkeypatch.setattr(wgrad_images, "weight_grad", spy_images)
        for name in ("conv2d", "input_grad", "weight_grad"):
            self._wrap(monkeypatch, ort_conv, name, self.declined, only_none=True)
        for name in ("_conv2d_backward", "_conv_transpose2d_backward"):
            self._wrap(monkeypatch, conv, name, self.ember, only_none=False)

    @staticmethod
    def _wrap(
        monkeypatch: pytest.MonkeyPatch,
        module: Any,
        name: str,
        count: Counter[str],
        only_none: bool,
    ) -> None:
        fn = getattr(module, name)

        def spy(*args: Any) -> Any:
            out = fn(*args)
            if not only_none or (out is None and args[0].dtype == np.float32):
                count[name] += 1
            return out

        monkeypatch.setattr(module, name, spy)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    monkeypatch.delenv("EMBER_CONV", raising=False)
    return Spy(monkeypatch)


# ------------------------------------------------------------------------------ the sweep
CHANNELS = [1, 3, 8, 16, 17, 32, 48]


def _conv_cases(count: int, seed: int) -> list[tuple[int, ...]]:
    """(N, C, O, H, W, k, s, p, d, has_bias) drawn from the lists of the issue, at most ~4 M
    multiply-adds each."""
    rng = np.random.default_rng(seed)
    out: list[tuple[int, ...]] = []
    while len(out) < count:
        n = int(rng.choice([1, 5, 16, 32]))
        c, o = (int(v) for v in rng.choice(CHANNELS, 2))
        k, s, p, d = (int(rng.choice(v)) for v in ([1, 3, 4, 5], [1, 2], [0, 1, 2], [1, 2]))
        h, w = (int(v) for v in rng.choice([1, 2, 3, 5, 8, 11, 16, 32], 2))
        ho = (h + 2 * p - d * (k - 1) - 1) // s + 1
        wo = (w + 2 * p - d * (k - 1) - 1) // s + 1
        if ho < 1 or wo < 1 or n * ho * wo * c * o * k * k > 4_000_000:
            continue
        out.append((n, c, o, h, w, k, s, p, d, int(rng.integers(2))))
    return out


# shapes the rule takes to ORT: ResNet / DCGAN layers at a smaller batch, block-size edges
FIXED = [
    (16, 3, 16, 16, 16, 3, 1, 1, 1, 0),
    (16, 16, 32, 16, 16, 3, 2, 1, 1, 0),
    (16, 32, 32, 8, 8, 3, 1, 1, 1, 1),
    (16, 16, 32, 16, 16, 1, 2, 0, 1, 0),  # the last row and column are not read
    (32, 1, 32, 16, 16, 4, 2, 1, 1, 0),
    (16, 48, 16, 7, 9, 5, 1, 2, 2, 1),
    (32, 16, 16, 5, 4, 3, 2, 2, 2, 1),
    (16, 8, 16, 12, 12, 3, 1, 1, 1, 0),  # 8 input channels: the NCHWc filter order with B=8
]
CASES = FIXED + _conv_cases(80, seed=20)


def _conv_data(case: tuple[int, ...], seed: int) -> tuple[np.ndarray, ...]:
    n, c, o, h, w, k, _, _, _, has_bias = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((o, c, k, k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32) if has_bias else np.zeros(o, np.float32)
    return x, wt, b


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(np.float64) for a in arrays]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_conv2d_matches_float64(spy: Spy, threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    for i, case in enumerate(CASES):
        n, c, o, _, _, k, s, p, d, _ = case
        st, pd, dl = (s, s), (p, p), (d, d)
        x, wt, b = _conv_data(case, seed=i)
        x64, w64, b64 = _f64(x, wt, b)
        y64 = conv.conv2d(x64, w64, b64, st, pd, dl, 1)
        scale = conv.conv2d(abs(x64), abs(w64), abs(b64), st, pd, dl, 1)
        _tol(conv.conv2d(x, wt, b, st, pd, dl, 1), y64, scale, c * k * k + 1)
        g = np.random.default_rng(100 + i).standard_normal(y64.shape, dtype=np.float32)
        (g64,) = _f64(g)
        gx, gw, gb = conv.conv2d_backward(g, x, wt, st, pd, dl, 1, True, True)
        gx64, gw64, _ = conv.conv2d_backward(g64, x64, w64, st, pd, dl, 1, True, True)
        sx, sw, _ = conv.conv2d_backward(abs(g64), abs(x64), abs(w64), st, pd, dl, 1, True, True)
        assert gx is not None and gw is not None and sx is not None and sw is not None
        _tol(gx, gx64, sx, o * k * k)
        _tol(gw, gw64, sw, n * y64.shape[2] * y64.shape[3])
        assert_channel_sums(gb, g)
        # one gradient alone takes the same forms
        only_x = conv.conv2d_backward(g, x, wt, st, pd, dl, 1, True, False)
        only_w = conv.conv2d_backward(g, x, wt, st, pd, dl, 1, False, True)
        assert only_x[1] is None and only_w[0] is None
        np.testing.assert_array_equal(only_x[0], gx)
        np.testing.assert_array_equal(only_w[1], gw)
    # the sweep reaches every ORT form, and ember's kernels for the shapes the rule declines
    assert min(spy.ort[f] for f in ("_nchwc_conv", "_plain_conv", "_conv_transpose")) >= 5
    assert spy.declined["weight_grad"] >= 5


def _transpose_cases(count: int, seed: int) -> list[tuple[int, ...]]:
    """(N, C_in, C_out, H, W, k, s, p, d, output_padding, has_bias)."""
    rng = np.random.default_rng(seed)
    out = [
        (16, 64, 32, 1, 1, 4, 1, 0, 1, 0, 0),  # DCGAN's first layer: the flipped conv
        (16, 32, 16, 4, 4, 4, 2, 1, 1, 0, 1),
        (16, 16, 1, 8, 8, 4, 2, 1, 1, 1, 0),
    ]
    while len(out) < count:
        n = int(rng.choice([1, 5, 16, 32]))
        c, o = (int(v) for v in rng.choice(CHANNELS, 2))
        k, s, p, d = (int(rng.choice(v)) for v in ([1, 3, 4, 5], [1, 2], [0, 1, 2], [1, 2]))
        h, w = (int(v) for v in rng.choice([1, 2, 3, 5, 8, 11, 16], 2))
        op = int(rng.integers(s))  # ember's kernel takes output padding below the stride
        ho = (h - 1) * s - 2 * p + d * (k - 1) + op + 1
        wo = (w - 1) * s - 2 * p + d * (k - 1) + op + 1
        if ho < 1 or wo < 1 or n * h * w * c * o * k * k > 4_000_000:
            continue
        out.append((n, c, o, h, w, k, s, p, d, op, int(rng.integers(2))))
    return out


T_CASES = _transpose_cases(80, seed=21)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_conv_transpose2d_matches_float64(
    spy: Spy, threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    for i, case in enumerate(T_CASES):
        n, c, o, h, w, k, s, p, d, op, has_bias = case
        st, pd, dl, opd = (s, s), (p, p), (d, d), (op, op)
        rng = np.random.default_rng(i)
        x = rng.standard_normal((n, c, h, w), dtype=np.float32)
        wt = rng.standard_normal((c, o, k, k), dtype=np.float32)
        b = rng.standard_normal(o, dtype=np.float32) if has_bias else np.zeros(o, np.float32)
        x64, w64, b64 = _f64(x, wt, b)
        y64 = conv.conv_transpose2d(x64, w64, b64, st, pd, opd, 1, dl)
        scale = conv.conv_transpose2d(abs(x64), abs(w64), abs(b64), st, pd, opd, 1, dl)
        _tol(conv.conv_transpose2d(x, wt, b, st, pd, opd, 1, dl), y64, scale, c * k * k + 1)
        g = rng.standard_normal(y64.shape, dtype=np.float32)
        (g64,) = _f64(g)
        gx, gw, gb = conv.conv_transpose2d_backward(g, x, wt, st, pd, 1, dl, True, True)
        gx64, gw64, _ = conv.conv_transpose2d_backward(g64, x64, w64, st, pd, 1, dl, True, True)
        sx, sw, _ = conv.conv_transpose2d_backward(
            abs(g64), abs(x64), abs(w64), st, pd, 1, dl, True, True
        )
        assert gx is not None and gw is not None and sx is not None and sw is not None
        _tol(gx, gx64, sx, o * k * k)
        _tol(gw, gw64, sw, n * h * w)
        assert_channel_sums(gb, g)
    assert spy.ort["_nchwc_conv"] >= 5 and spy.ort["_conv_transpose"] >= 5
    assert spy.declined["weight_grad"] >= 5 and spy.ember["_conv_transpose2d_backward"] >= 5


# ------------------------------------------------------------------------------ the rule
def _resnet_layer(c: int, o: int, hw: int, s: int, n: int = 32) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, hw, hw), dtype=np.float32)
    w = rng.standard_normal((o, c, 3, 3), dtype=np.float32)
    g = rng.standard_normal((n, o, (hw - 1) // s + 1, (hw - 1) // s + 1), dtype=np.float32)
    return x, w, g


def _step(x: np.ndarray, w: np.ndarray, g: np.ndarray, s: int) -> None:
    conv.conv2d(x, w, np.zeros(w.shape[0], x.dtype), (s, s), (1, 1), (1, 1), 1)
    conv.conv2d_backward(g, x, w, (s, s), (1, 1), (1, 1), 1, True, True)


@pytest.mark.parametrize(
    ("layer", "ort", "declined"),
    [
        # 16 -> 32 at 16x16, stride 2: NCHWc forward, ConvTranspose, swapped weight gradient
        ((16, 32, 16, 2), {"_nchwc_conv": 2, "_conv_transpose": 1}, {}),
        # 32 -> 32 at 16x16, stride 1: the flipped conv fits NCHWc too; the weight gradient
        # from row-stacked x (16 channels up, stride 1, 2 zero columns of 18)
        ((32, 32, 16, 1), {"_nchwc_conv": 2, "wgrad_rows": 1}, {}),
        # 16 -> 16 at 32x32: the same (ORT's swapped-axes conv would take no 1024-position grid)
        ((16, 16, 32, 1), {"_nchwc_conv": 2, "wgrad_rows": 1}, {}),
        # 17 input channels: plain Convs forward and flipped (17 channels do not fit); at 8x8
        # the rows' 2 zero columns of 10 are too many, ORT's swapped-axes conv takes it
        ((17, 16, 8, 1), {"_plain_conv": 2, "_nchwc_conv": 1}, {}),
        # a 3-channel stem, 3x3: a plain Conv forward (MLAS's NCHW-input kernel is slow below
        # 4x4), a ConvTranspose input gradient (16 > 3 channels: the smaller columns), the
        # weight gradient's 27 taps one product per image (ember's, not ORT's)
        ((3, 16, 16, 1), {"_plain_conv": 1, "_conv_transpose": 1}, {}),
    ],
)
def test_rule_picks_the_forms(
    spy: Spy,
    layer: tuple[int, ...],
    ort: dict[str, int],
    declined: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "1")  # one run per form (no batch shares)
    ort_conv._on(np.zeros(1, np.float32))  # the block size is found on the first call
    if ort_conv._block != 16:
        pytest.skip("the counts are those of a CPU with 16-float NCHWc blocks (AVX-512)")
    c, o, hw, s = layer
    _step(*_resnet_layer(c, o, hw, s), s)
    assert dict(spy.ort) == ort
    assert dict(spy.declined) == declined
    assert spy.ember["_conv2d_backward"] == declined.get("weight_grad", 0)
    assert spy.ember["wgrad_images"] == (1 if c * 9 <= 32 else 0)


def test_small_batch_keeps_ember_weight_gradient(spy: Spy) -> None:
    x, w, g = _resnet_layer(32, 32, 8, 1, n=5)
    _step(x, w, g, 1)
    assert dict(spy.declined) == {"weight_grad": 1}  # N = 5 is no multiple of the block
    assert spy.ember["_conv2d_backward"] == 1


def _ember_only(spy: Spy) -> None:
    assert not spy.ort
    assert dict(spy.declined) == {"conv2d": 1, "input_grad": 1, "weight_grad": 1}
    assert spy.ember["_conv2d_backward"] == 1


def test_opt_out(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    x, w, g = _resnet_layer(16, 32, 8, 1)
    monkeypatch.setenv("EMBER_CONV", "numpy")
    _step(x, w, g, 1)
    _ember_only(spy)


@pytest.mark.parametrize("failure", ["import", "session"])
def test_unavailable_runtime_falls_back(
    spy: Spy, failure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, w, g = _resnet_layer(16, 32, 8, 1)
    monkeypatch.setattr(ort_conv, "_block", ort_conv._block)  # restored after the test
    monkeypatch.setattr(ort_conv, "_runtime", ort_conv._UNSET)
    if failure == "import":
        monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    else:

        def broken(*args: Any) -> Any:
            raise RuntimeError("no session")

        monkeypatch.setattr(ort_conv, "_create", broken)
    _step(x, w, g, 1)
    assert ort_conv._runtime is None and ort_conv._block == 0
    _ember_only(spy)


def test_first_calls_from_many_threads_load_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads racing to the first float32 convolution: one loads onnxruntime (and finds the
    block size), the others wait for it and take the same forms: identical results."""
    import threading

    monkeypatch.delenv("EMBER_CONV", raising=False)
    monkeypatch.setattr(ort_conv, "_block", ort_conv._block)  # restored after the test
    monkeypatch.setattr(ort_conv, "_runtime", ort_conv._UNSET)
    loads = []
    load = ort_conv._load

    def counted() -> Any:
        loads.append(1)
        return load()

    monkeypatch.setattr(ort_conv, "_load", counted)
    x, w, _ = _resnet_layer(16, 32, 8, 1)
    zero = np.zeros(w.shape[0], np.float32)
    start = threading.Barrier(4)
    out: list[np.ndarray] = []

    def first_call() -> None:
        start.wait()
        out.append(conv.conv2d(x, w, zero, (1, 1), (1, 1), (1, 1), 1))

    workers = [threading.Thread(target=first_call) for _ in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(loads) == 1 and len(out) == 4
    for y in out[1:]:
        np.testing.assert_array_equal(y, out[0])
    np.testing.assert_array_equal(out[0], conv.conv2d(x, w, zero, (1, 1), (1, 1), (1, 1), 1))


def test_without_nchwc_kernels(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Block size 0 (an ARM build): plain Conv forwards, ConvTranspose input gradients (32 > 16
    channels), ember's weight gradients."""
    monkeypatch.setenv("EMBER_NUM_THREADS", "1")  # one run per form (no batch shares)
    ort_conv._on(np.zeros(1, np.float32))
    monkeypatch.setattr(ort_conv, "_block", 0)
    for s in (1, 2):
        _step(*_resnet_layer(16, 32, 8, s), s)
    assert dict(spy.ort) == {"_plain_conv": 2, "_conv_transpose": 2}
    assert dict(spy.declined) == {"weight_grad": 2}


def test_nonfinite_weight_and_float64_stay_on_ember(spy: Spy) -> None:
    """A non-finite weight keeps the forward and input gradient on ember's kernels (a padding
    zero must not meet it); the weight gradient does not read the weight and stays on ORT."""
    x, w, g = _resnet_layer(16, 32, 8, 1)
    w[3, 4, 1, 1] = np.nan  # (an inf would warn from the pool's threads: 0 * inf)
    _step(x, w, g, 1)
    assert dict(spy.ort) == {"_nchwc_conv": 1}
    assert dict(spy.declined) == {"conv2d": 1, "input_grad": 1}
    spy.ort.clear()
    spy.ember.clear()
    x, w, g = _resnet_layer(16, 32, 8, 1)
    _step(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64), 1)
    assert not spy.ort and spy.ember["_conv2d_backward"] == 1


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("s", [1, 2])
def test_nonfinite_inputs_as_ember(value: float, s: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-finite x or output gradient reaches only what it feeds: the same NaN / inf places
    as ember's own kernels (a non-finite weight gradient from ORT is computed again by ember)."""
    x, w, g = _resnet_layer(16, 32, 8, s, n=16)
    x[2, 3, 0, 7] = x[5, 1, 4, 4] = value
    g[1, 2, -1, 0] = g[0, 7, 2, 2] = value
    b = np.zeros(32, np.float32)

    def run() -> list[np.ndarray]:
        with np.errstate(invalid="ignore", over="ignore"):
            y = conv.conv2d(x, w, b, (s, s), (1, 1), (1, 1), 1)
            gx, gw, _ = conv.conv2d_backward(g, x, w, (s, s), (1, 1), (1, 1), 1, True, True)
            # the transposed conv of g back to x's shape, and its gradients for the output x
            op, zero = (s - 1, s - 1), np.zeros(16, np.float32)
            ty = conv.conv_transpose2d(g, w, zero, (s, s), (1, 1), op, 1, (1, 1))
            tgx, tgw, _ = conv.conv_transpose2d_backward(
                x, g, w, (s, s), (1, 1), 1, (1, 1), True, True
            )
        assert ty.shape == x.shape
        return [a for a in (y, gx, gw, ty, tgx, tgw) if a is not None]

    monkeypatch.delenv("EMBER_CONV", raising=False)
    got = run()
    monkeypatch.setenv("EMBER_CONV", "numpy")
    want = run()
    for a, e in zip(got, want, strict=True):
        for mask in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(mask(a), mask(e))
        fin = np.isfinite(e)
        np.testing.assert_allclose(a[fin], e[fin], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_deterministic(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two calls, and a call on a freshly built session, give the same bits."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads)
    monkeypatch.delenv("EMBER_CONV", raising=False)
    x, w, g = _resnet_layer(16, 32, 16, 2)
    b = np.random.default_rng(9).standard_normal(32, dtype=np.float32)

    def run() -> list[np.ndarray]:
        y = conv.conv2d(x, w, b, (2, 2), (1, 1), (1, 1), 1)
        gx, gw, _ = conv.conv2d_backward(g, x, w, (2, 2), (1, 1), (1, 1), 1, True, True)
        assert gx is not None and gw is not None
        return [y, gx, gw]

    first, second = run(), run()
    ort_conv._session.cache_clear()
    third = run()
    for a, b2, c in zip(first, second, third, strict=True):
        np.testing.assert_array_equal(a, b2)
        np.testing.assert_array_equal(a, c)


def _runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """(builder, batch of the run's first input, intra-op threads) of each ORT run from now on,
    from whichever thread makes it."""
    runs: list[tuple[str, int, int]] = []
    run = ort_conv._run

    def spy_run(build: Any, args: Any, feeds: Any, threads: int) -> Any:
        runs.append((build.__name__, next(iter(feeds.values())).shape[0], threads))
        return run(build, args, feeds, threads)

    monkeypatch.setattr(ort_conv, "_run", spy_run)
    return runs


@pytest.mark.parametrize(
    ("layer", "threads"),
    [
        # (C, O, H=W, stride): the forward's multiply-adds against _THREAD_MACS = 16.8 M
        ((16, 32, 32, 2), 2),  # 37.7 M: MLAS's second thread
        ((16, 32, 16, 2), 1),  # 9.4 M: one thread
    ],
)
def test_small_convs_run_one_ort_thread(
    layer: tuple[int, ...], threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    monkeypatch.delenv("EMBER_CONV", raising=False)
    runs = _runs(monkeypatch)
    c, o, hw, s = layer
    x, w, g = _resnet_layer(c, o, hw, s)
    conv.conv2d(x, w, None, (s, s), (1, 1), (1, 1), 1)
    conv.conv2d_backward(g, x, w, (s, s), (1, 1), (1, 1), 1, False, True)
    assert [(name, t) for name, _, t in runs] == [("_nchwc_conv", threads)] * 2
    runs.clear()
    with pool._as_share():
        conv.conv2d(x, w, None, (s, s), (1, 1), (1, 1), 1)
    assert [t for *_, t in runs] == [1]  # inside a pool share: one thread whatever the size


@pytest.mark.parametrize("n", [32, 9])
def test_large_conv_transpose_splits_the_batch(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stride-2 input gradient from _SPLIT_TRANSPOSE_MACS up: one ConvTranspose per batch
    share on one ORT thread each at two threads, one whole-batch run at one thread; the same
    bits either way, and a small one runs whole on one thread."""
    monkeypatch.delenv("EMBER_CONV", raising=False)
    runs = _runs(monkeypatch)
    x, w, g = _resnet_layer(16, 32, 32, 2, n=n)  # N * 1.2 M multiply-adds
    got = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        runs.clear()
        gx, _, _ = conv.conv2d_backward(g, x, w, (2, 2), (1, 1), (1, 1), 1, True, False)
        got[threads] = gx
        transposes = sorted((b, t) for name, b, t in runs if name == "_conv_transpose")
        half = -(-n // 2)
        assert transposes == ([(n, 1)] if threads == "1" else sorted([(half, 1), (n - half, 1)]))
    assert got["1"] is not None
    np.testing.assert_array_equal(got["1"], got["2"])
    x, w, g = _resnet_layer(16, 32, 16, 2, n=2)  # 0.6 M: below the split
    runs.clear()
    conv.conv2d_backward(g, x, w, (2, 2), (1, 1), (1, 1), 1, True, False)
    assert [(name, b, t) for name, b, t in runs] == [("_conv_transpose", 2, 1)]


@pytest.mark.parametrize(("s", "d", "op"), [(1, 2, 1), (1, 3, 2), (2, 2, 1)])
def test_output_padding_up_to_the_dilation(s: int, d: int, op: int) -> None:
    """Output padding below the dilation but not the stride (PyTorch allows it; ember's own
    kernel does not): the stride-1 flipped conv pads one row more, the input gradient drops
    the conv's extra rows. Against PyTorch in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(s * 10 + d)
    x = rng.standard_normal((16, 16, 5, 6), dtype=np.float32)
    w = rng.standard_normal((16, 32, 3, 3), dtype=np.float32)
    b = rng.standard_normal(32, dtype=np.float32)
    st, dl = (s, s), (d, d)
    y = conv.conv_transpose2d(x, w, b, st, (1, 1), (op, op), 1, dl)
    tx, tw, tb = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv_transpose2d(tx, tw, tb, s, 1, op, 1, d)
    g = rng.standard_normal(y.shape, dtype=np.float32)
    ty.backward(torch.tensor(g.astype(np.float64)))
    gx, gw, _ = conv.conv_transpose2d_backward(g, x, w, st, (1, 1), 1, dl, True, True)
    for got, want in ((y, ty), (gx, tx.grad), (gw, tw.grad)):
        assert got is not None and want is not None
        ref = want.detach().numpy()
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5 * float(np.abs(ref).max()))


@pytest.mark.parametrize("transposed", [False, True])
def test_small_conv_gradients_run_at_once(
    transposed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below _THREAD_MACS, with both gradients asked for at two threads, ORT's input and weight
    gradients run at once on two threads (one ORT thread each), with the bits of one thread;
    a large conv, or one gradient alone, runs them on the calling thread."""
    monkeypatch.delenv("EMBER_CONV", raising=False)
    rng = np.random.default_rng(11)
    # LeNet's second layer (15.4 M multiply-adds); its transpose with the roles swapped
    x = rng.standard_normal((64, 6, 14, 14), dtype=np.float32)
    w = rng.standard_normal((16, 6, 5, 5), dtype=np.float32)
    g = rng.standard_normal((64, 16, 10, 10), dtype=np.float32)
    if transposed:
        x, g, w = g, x, w.copy()
    backward = conv.conv_transpose2d_backward if transposed else conv.conv2d_backward
    geo = ((1, 1), (0, 0), 1, (1, 1)) if transposed else ((1, 1), (0, 0), (1, 1), 1)
    assert ort_conv.one_thread(x.size * w[0].size if transposed else g.size * w[0].size)
    callers: list[tuple[str, int]] = []
    run = ort_conv._run

    def spy_run(build: Any, args: Any, feeds: Any, threads: int) -> Any:
        callers.append((build.__name__, threading.get_ident()))
        return run(build, args, feeds, threads)

    monkeypatch.setattr(ort_conv, "_run", spy_run)
    got = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        callers.clear()
        gx, gw, _ = backward(g, x, w, *geo, True, True, False)  # type: ignore[operator]
        assert gx is not None and gw is not None
        got[threads] = (gx, gw)
        idents = {ident for _, ident in callers}
        assert len(callers) == 2 and len(idents) == int(threads)
        assert threading.get_ident() in idents
    for a, b in zip(got["1"], got["2"], strict=True):
        np.testing.assert_array_equal(a, b)
    callers.clear()
    backward(g, x, w, *geo, False, True, False)  # type: ignore[operator]
    assert {ident for _, ident in callers} == {threading.get_ident()}
