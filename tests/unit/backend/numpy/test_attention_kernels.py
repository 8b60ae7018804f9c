"""The NumPy attention kernels worked in batch shares on the pool: the forward and the fused
backward against a float64 reference, the same bits at any thread count, the inputs the
backward leaves to the row's rule, and kernels called inside a share running unsplit."""

from __future__ import annotations

import threading
from types import NotImplementedType
from typing import Any

import numpy as np
import pytest
from helpers.tolerance import attention_tolerance

from ember.backend.numpy.kernels import attention as attn
from ember.backend.numpy.kernels import threads

NONE = np.zeros((), np.float32)


def _reference(
    g: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray,
    keep: np.ndarray,
    scale: float,
    causal: bool,
) -> tuple[np.ndarray, ...]:
    """float64 output and (gq, gk, gv, gbias, gkeep) of attention, written out step by step;
    the bias and keep gradients have the scores' shape, as the kernel gives them."""
    g, q, k, v, bias, keep = (a.astype(np.float64) for a in (g, q, k, v, bias, keep))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if bias.ndim:
        s = s + bias
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tri(L, S, dtype=bool), s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    dead = top == -np.inf
    e = np.exp(s - np.where(dead, 0.0, top))
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, e.sum(axis=-1, keepdims=True)))
    pk = p * keep if keep.ndim else p
    out = pk @ v
    gv = np.swapaxes(pk, -1, -2) @ g
    gpk = g @ np.swapaxes(v, -1, -2)
    gkeep = gpk * p if keep.ndim else np.zeros(())
    gp = gpk * keep if keep.ndim else gpk
    gs = p * (gp - (gp * p).sum(axis=-1, keepdims=True))
    gbias = gs if bias.ndim else np.zeros(())
    gq = gs * scale @ k
    gk = np.swapaxes(gs * scale, -1, -2) @ q
    return out, gq, gk, gv, gbias, gkeep


def _inputs(
    rng: Any, shape: tuple[int, ...], dtype: Any, bias: tuple[int, ...] | None = None
) -> tuple[np.ndarray, ...]:
    q, k, v, g = (rng.normal(size=shape).astype(dtype) for _ in range(4))
    b = rng.normal(size=bias).astype(dtype) if bias is not None else NONE.astype(dtype)
    return g, q, k, v, b


def _run(
    g: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray, keep: np.ndarray,
    scale: float, causal: bool,
) -> tuple[np.ndarray, ...]:  # fmt: skip
    out = attn.attention(q, k, v, bias, keep, scale, causal)
    back = attn.attention_backward(g, q, k, v, bias, keep, scale, causal)
    assert not isinstance(back, NotImplementedType)
    return (out, *back)


@pytest.mark.parametrize("threads_", ["1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("shape", "causal"),
    [((16, 4, 64, 32), True), ((8, 4, 128, 64), True), ((3, 2, 5, 4), False), ((7, 33, 16), True)],
)
def test_forward_and_backward_match_float64(
    monkeypatch: pytest.MonkeyPatch, threads_: str, dtype: Any, shape: tuple[int, ...], causal: bool
) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", threads_)
    rng = np.random.default_rng(11)
    g, q, k, v, bias = _inputs(rng, shape, dtype)
    keep = NONE.astype(dtype)
    scale = 1 / np.sqrt(shape[-1])
    got = _run(g, q, k, v, bias, keep, scale, causal)
    want = _reference(g, q, k, v, bias, keep, scale, causal)
    fwd = attention_tolerance(dtype, shape[-2], shape[-1])
    bwd = attention_tolerance(dtype, shape[-2], shape[-1], backward=True)
    for i, (a, w) in enumerate(zip(got, want)):
        assert a.dtype == dtype and a.shape == w.shape, i
        np.testing.assert_allclose(a, w, **(fwd if i == 0 else bwd), err_msg=f"output {i}")


@pytest.mark.parametrize("threads_", ["1", "2"])
def test_bias_keep_and_fully_masked_rows(monkeypatch: pytest.MonkeyPatch, threads_: str) -> None:
    """A (L, S) bias broadcast over the batch, a (B, H, L, S) keep mask, and queries whose every
    key is masked out: those get weights 0, an output of 0 and no gradient, never NaN."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads_)
    rng = np.random.default_rng(5)
    shape, L = (6, 2, 40, 16), 40
    g, q, k, v, bias = _inputs(rng, shape, np.float64, bias=(L, L))
    bias[3] = -np.inf  # query 3 attends to nothing
    bias[:, 7] = -np.inf  # nor does any query see key 7
    keep = rng.integers(0, 2, size=(6, 2, L, L)) * 2.0
    got = _run(g, q, k, v, bias, keep, 0.25, False)
    want = _reference(g, q, k, v, bias, keep, 0.25, False)
    assert got[0].shape == (6, 2, L, 16)
    assert not np.isnan(np.concatenate([a.ravel() for a in got])).any()
    np.testing.assert_array_equal(got[0][:, :, 3], 0.0)
    np.testing.assert_array_equal(got[1][:, :, 3], 0.0)  # no gradient reaches q's query 3
    tol = attention_tolerance(np.float64, L, 16, backward=True)
    for i, (a, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, w, **tol, err_msg=f"output {i}")


def test_the_same_bits_at_any_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch share's rows are computed as the whole batch's are."""
    rng = np.random.default_rng(2)
    g, q, k, v, bias = _inputs(rng, (16, 4, 64, 32), np.float32)
    runs = []
    for t in ("1", "2", "3"):
        monkeypatch.setenv("EMBER_NUM_THREADS", t)
        runs.append(_run(g, q, k, v, bias, NONE, 0.177, True))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)


def test_the_forward_splits_the_batch_on_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    seen: list[tuple[int, int]] = []
    split = threads._parallel_split

    def spy(n: int, elems: int, fn: Any, blas: bool = True) -> None:
        def record(lo: int, hi: int) -> None:
            seen.append((lo, hi))
            fn(lo, hi)

        split(n, elems, record, blas)

    monkeypatch.setattr(attn, "_parallel_split", spy)
    rng = np.random.default_rng(4)
    g, q, k, v, bias = _inputs(rng, (16, 4, 64, 32), np.float32)
    attn.attention(q, k, v, bias, NONE, 0.2, True)
    attn.attention_backward(g, q, k, v, bias, NONE, 0.2, True)
    assert sorted(seen) == [(0, 8), (0, 8), (8, 16), (8, 16)]


@pytest.mark.parametrize("threads_", ["1", "2"])
def test_a_broadcast_key_batch_runs_forward_and_goes_to_the_rule_backward(
    monkeypatch: pytest.MonkeyPatch, threads_: str
) -> None:
    """k and v shared by every batch element (size 1 there): the forward slices q alone; their
    gradients would be sums over shares, so the backward declines to the row's rule."""
    monkeypatch.setenv("EMBER_NUM_THREADS", threads_)
    rng = np.random.default_rng(8)
    q = rng.normal(size=(8, 4, 48, 16))
    k, v = rng.normal(size=(1, 4, 48, 16)), rng.normal(size=(1, 4, 48, 16))
    none = np.zeros(())
    out = attn.attention(q, k, v, none, none, 0.25, True)
    want = _reference(np.zeros_like(q), q, k, v, none, none, 0.25, True)[0]
    np.testing.assert_allclose(out, want, **attention_tolerance(np.float64, 48, 16))
    assert attn.attention_backward(out, q, k, v, none, none, 0.25, True) is NotImplemented


@pytest.mark.parametrize(
    "case",
    ["float16", "mixed dtypes", "wider bias", "batch of one", "grad dtype", "grad shape"],
)
def test_the_backward_declines_what_it_does_not_split(case: str) -> None:
    rng = np.random.default_rng(9)
    g, q, k, v, bias = _inputs(rng, (4, 2, 8, 8), np.float32)
    keep = NONE
    if case == "float16":
        g, q, k, v, bias, keep = (a.astype(np.float16) for a in (g, q, k, v, bias, keep))
    elif case == "mixed dtypes":
        v = v.astype(np.float64)
    elif case == "wider bias":  # more batch dims than q, k and v: it widens the scores
        bias = rng.normal(size=(5, 4, 2, 8, 8)).astype(np.float32)
    elif case == "batch of one":
        g, q, k, v = g[:1], q[:1], k[:1], v[:1]
    elif case == "grad dtype":
        g = g.astype(np.float64)
    else:
        g = g[..., :4]
    assert attn.attention_backward(g, q, k, v, bias, keep, 0.5, False) is NotImplemented


def test_a_float16_forward_is_one_share_with_float16_output() -> None:
    rng = np.random.default_rng(10)
    g, q, k, v, bias = _inputs(rng, (4, 2, 8, 8), np.float16)
    out = attn.attention(q, k, v, bias, NONE.astype(np.float16), 0.5, True)
    want = _reference(g, q, k, v, bias, NONE, 0.5, True)[0]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, want, **attention_tolerance(np.float16, 8, 8))


def test_kernels_inside_a_share_run_unsplit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A share's row-blocked kernels stay on the share's thread, the flag saying so is the outer
    one again once the share returns, and outside a share the same rows do split."""
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    big = (1 << 12, 1 << 10)  # rows, cols: well above the row kernels' split threshold
    shares: dict[int, tuple[int, set[int]]] = {}

    def share(lo: int, hi: int) -> None:
        ran: list[int] = []
        threads._parallel_rows(*big, lambda a, b: ran.append(threading.get_ident()))
        shares[lo] = (threading.get_ident(), set(ran))
        assert threads._in_share()

    threads._parallel_split(2, 1 << 20, share)
    assert not threads._in_share()
    assert sorted(shares) == [0, 1]
    assert shares[0][0] != shares[1][0]  # the caller takes one share, a pool thread the other
    for owner, ran in shares.values():
        assert ran == {owner}
    ran: list[int] = []
    lock = threading.Lock()

    def record(a: int, b: int) -> None:
        with lock:
            ran.append(threading.get_ident())

    threads._parallel_rows(*big, record)
    assert len(set(ran)) == 2
