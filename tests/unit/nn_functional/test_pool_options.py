"""Pooling options as PyTorch has them (issue 19): ``ceil_mode`` for max / average pooling in 1-d
and 2-d, ``count_include_pad`` and ``divisor_override`` for average pooling, ``return_indices``
for max pooling, and ``max_unpool1d/2d``. Values and input gradients against torch in float64,
on every backend (this package's conftest); indices exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember as em
from ember.nn import functional as F

from .compare import check, dev


def _sees_input(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> bool:
    """Every window has a tap inside the input (otherwise torch's CPU backward writes out of
    bounds, and ember refuses the call)."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out >= 1 and all(any(0 <= o * s - p + t * d < n for t in range(k)) for o in range(out))


def _configs(seed: int, count: int, dilation: bool) -> list[dict[str, Any]]:
    """Random 2-d geometries (sizes 1-9, kernels 1-4, strides 1-3, padding up to half the
    kernel) that torch accepts."""
    rng = np.random.default_rng(seed)
    found: list[dict[str, Any]] = []
    while len(found) < count:
        hw = tuple(int(v) for v in rng.integers(1, 10, size=2))
        k = tuple(int(v) for v in rng.integers(1, 5, size=2))
        s = tuple(int(v) for v in rng.integers(1, 4, size=2))
        p = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
        d = tuple(int(v) for v in rng.integers(1, 3, size=2)) if dilation else (1, 1)
        ceil = bool(rng.integers(0, 2))
        if all(_sees_input(hw[i], k[i], s[i], p[i], d[i], ceil) for i in (0, 1)):
            found.append({"hw": hw, "k": k, "s": s, "p": p, "d": d, "ceil": ceil})
    return found


# ---------------------------------------------------------------- max pooling
@pytest.mark.parametrize("cfg", _configs(19, 40, dilation=True), ids=str)
def test_max_pool2d_geometries(cfg: dict[str, Any], node_seed: int) -> None:
    x = np.random.default_rng(node_seed).normal(size=(2, 3, *cfg["hw"]))
    args = (cfg["k"], cfg["s"], cfg["p"], cfg["d"], cfg["ceil"])
    check(lambda x: F.max_pool2d(x, *args), lambda x: TF.max_pool2d(x, *args), x)


CEIL_EDGES = [
    # (size, kernel, stride, padding): what ceil_mode does at the end of an axis
    (5, 2, 2, 1),  # rounding up would start a window in the right padding: dropped
    (6, 3, 2, 0),  # a last window that runs one past the input
    (7, 3, 3, 1),  # ... past the input and its padding
    (1, 2, 2, 0),  # a kernel larger than the input still gives one window
    (2, 3, 2, 1),  # padding on both sides, the last window partial
    (8, 2, 1, 1),  # stride 1: ceil and floor agree
    (9, 4, 3, 2),  # two windows, the last partial over padding
]


@pytest.mark.parametrize(("n", "k", "s", "p"), CEIL_EDGES)
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("pool", ["max", "avg", "avg_count_exclude_pad"])
def test_ceil_mode_edges(
    n: int, k: int, s: int, p: int, ceil_mode: bool, pool: str, node_seed: int
) -> None:
    if not ceil_mode and n + 2 * p < k:
        pytest.skip("no window fits in floor mode (the error tests check the refusal)")
    rng = np.random.default_rng(node_seed)
    x2, x1 = rng.normal(size=(2, 2, n, n + 1)), rng.normal(size=(2, 3, n))
    kw: dict[str, Any] = {"ceil_mode": ceil_mode}
    if pool != "max":
        kw["count_include_pad"] = pool == "avg"
    ours2, ours1 = (F.max_pool2d, F.max_pool1d) if pool == "max" else (F.avg_pool2d, F.avg_pool1d)
    ref2, ref1 = (TF.max_pool2d, TF.max_pool1d) if pool == "max" else (TF.avg_pool2d, TF.avg_pool1d)
    check(lambda x: ours2(x, k, s, p, **kw), lambda x: ref2(x, k, s, p, **kw), x2)
    check(lambda x: ours1(x, k, s, p, **kw), lambda x: ref1(x, k, s, p, **kw), x1)


MAX_1D = [
    ((2, 3, 9), {"kernel_size": 3}),
    ((2, 3, 9), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
    ((1, 2, 10), {"kernel_size": (3,), "stride": (2,), "padding": (1,), "dilation": (2,)}),
    ((3, 8), {"kernel_size": 4, "stride": 3, "padding": 2, "ceil_mode": True}),  # unbatched
]


@pytest.mark.parametrize(("shape", "kw"), MAX_1D)
def test_max_pool1d(shape: tuple[int, ...], kw: dict[str, Any], node_seed: int) -> None:
    x = np.random.default_rng(node_seed).normal(size=shape)
    check(lambda x: F.max_pool1d(x, **kw), lambda x: TF.max_pool1d(x, **kw), x)


def _indices_match(ours: Any, ref: Any) -> None:
    vals, idx = ours
    want_vals, want_idx = ref
    assert idx.dtype is em.int64 and not idx.is_tracked()
    assert idx.shape == tuple(want_idx.shape)
    np.testing.assert_array_equal(idx.to_numpy(), want_idx.numpy())
    np.testing.assert_allclose(vals.to_numpy(), want_vals.detach().numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("cfg", _configs(7, 25, dilation=True), ids=str)
def test_max_pool2d_return_indices(cfg: dict[str, Any], node_seed: int) -> None:
    # few distinct values: ties everywhere, so the first-maximum rule is exercised
    a = np.random.default_rng(node_seed).integers(-2, 3, size=(2, 2, *cfg["hw"])).astype(float)
    args = (cfg["k"], cfg["s"], cfg["p"], cfg["d"], cfg["ceil"])
    x = em.tensor(a, device=dev()).require_grad()
    ours = F.max_pool2d(x, *args, return_indices=True)
    _indices_match(ours, TF.max_pool2d(torch.tensor(a), *args, return_indices=True))
    assert ours[0].is_tracked()


@pytest.mark.parametrize(("shape", "kw"), MAX_1D)
def test_max_pool1d_return_indices(shape: tuple[int, ...], kw: dict[str, Any]) -> None:
    a = np.random.default_rng(3).integers(0, 3, size=shape).astype(float)
    ours = F.max_pool1d(em.tensor(a, device=dev()), **kw, return_indices=True)
    _indices_match(ours, TF.max_pool1d(torch.tensor(a), **kw, return_indices=True))


def test_indices_of_windows_of_minus_inf_point_inside_the_input() -> None:
    # every value -inf: torch keeps each window's first tap inside the input, never the padding
    a = np.full((1, 1, 5, 4), -np.inf)
    a[0, 0, 4, 3] = 1.0
    for kw in ({"padding": 1}, {"padding": 1, "ceil_mode": True}, {"dilation": 2, "padding": 1}):
        ours = F.max_pool2d(em.tensor(a, device=dev()), 3, 2, return_indices=True, **kw)
        _indices_match(ours, TF.max_pool2d(torch.tensor(a), 3, 2, return_indices=True, **kw))


# ---------------------------------------------------------------- average pooling
@pytest.mark.parametrize("cfg", _configs(23, 30, dilation=False), ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_geometries(
    cfg: dict[str, Any], count_include_pad: bool, node_seed: int
) -> None:
    x = np.random.default_rng(node_seed).normal(size=(2, 2, *cfg["hw"]))
    args = (cfg["k"], cfg["s"], cfg["p"], cfg["ceil"], count_include_pad)
    check(lambda x: F.avg_pool2d(x, *args), lambda x: TF.avg_pool2d(x, *args), x)


@pytest.mark.parametrize("divisor", [1, 3, 7, -2])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_avg_pool2d_divisor_override(divisor: int, ceil_mode: bool, node_seed: int) -> None:
    x = np.random.default_rng(node_seed).normal(size=(2, 3, 7, 6))
    kw = {"ceil_mode": ceil_mode, "divisor_override": divisor}
    check(lambda x: F.avg_pool2d(x, 3, 2, 1, **kw), lambda x: TF.avg_pool2d(x, 3, 2, 1, **kw), x)


def test_avg_pool1d_unbatched(node_seed: int) -> None:
    x = np.random.default_rng(node_seed).normal(size=(3, 11))
    kw = {"ceil_mode": True, "count_include_pad": False}
    check(lambda x: F.avg_pool1d(x, 4, 3, 2, **kw), lambda x: TF.avg_pool1d(x, 4, 3, 2, **kw), x)


# ---------------------------------------------------------------- max unpooling
UNPOOL_2D = [
    ((2, 3, 6, 8), {"kernel_size": 2}, None),
    ((1, 2, 7, 7), {"kernel_size": 3, "stride": 2, "padding": 1}, None),  # overlapping windows
    ((2, 2, 7, 9), {"kernel_size": 2, "stride": 2}, (7, 9)),  # the odd sizes given back
    ((2, 2, 7, 9), {"kernel_size": 2, "stride": 2}, (2, 2, 7, 9)),  # ... with N and C
    ((3, 5, 5), {"kernel_size": (2, 3), "stride": (2, 1)}, None),  # unbatched
]


def _round_trip(lib: Any, n: int, x: Any, kw: dict[str, Any], size: Any) -> Any:
    """``lib``'s max_unpool of its max_pool (return_indices=True) of x."""
    pooled = getattr(lib, f"max_pool{n}d")(x, **kw, return_indices=True)
    return getattr(lib, f"max_unpool{n}d")(*pooled, **kw, output_size=size)


@pytest.mark.parametrize(("shape", "kw", "size"), UNPOOL_2D)
def test_max_unpool2d_inverts_max_pool2d(
    shape: tuple[int, ...], kw: dict[str, Any], size: Any, node_seed: int
) -> None:
    a = np.random.default_rng(node_seed).normal(size=shape)
    y, idx = F.max_pool2d(em.tensor(a, device=dev()), **kw, return_indices=True)
    ty, tidx = TF.max_pool2d(torch.tensor(a), **kw, return_indices=True)
    i64 = idx.to_numpy()
    check(
        lambda v, i: F.max_unpool2d(v, i, **kw, output_size=size),
        lambda v, i: TF.max_unpool2d(v, i, **kw, output_size=size),
        ty.numpy(),
        i64,
    )
    # through the pooling too: the gradient reaches x at the maxima only
    check(lambda x: _round_trip(F, 2, x, kw, size), lambda x: _round_trip(TF, 2, x, kw, size), a)
    assert tidx.shape == idx.shape and y.shape == tuple(ty.shape)


@pytest.mark.parametrize("size", [None, (10,), (2, 3, 11)])
def test_max_unpool1d(size: Any, node_seed: int) -> None:
    a = np.random.default_rng(node_seed).normal(size=(2, 3, 10))
    kw = {"kernel_size": 3, "stride": 3, "padding": 1}
    check(lambda x: _round_trip(F, 1, x, kw, size), lambda x: _round_trip(TF, 1, x, kw, size), a)


def test_max_unpool2d_of_arbitrary_distinct_indices(node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    order = rng.random((2 * 3, 5 * 6)).argsort(axis=1)
    idx = order[:, :6].reshape(2, 3, 2, 3).astype(np.int64)
    x = rng.normal(size=(2, 3, 2, 3))
    kw = {"kernel_size": 3, "stride": 2, "output_size": (5, 6)}
    check(lambda v, i: F.max_unpool2d(v, i, **kw), lambda v, i: TF.max_unpool2d(v, i, **kw), x, idx)
