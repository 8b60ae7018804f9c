"""A 1x1 conv's weight gradient as one product (``conv._pointwise_weight_grad``): against a
float64 sum over the positions the conv reads, at strides 1-3 and sizes the stride does not
divide, and the route it takes (no ORT graph for it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ember.backend.numpy.kernels import conv, ort_conv

U = 2.0**-24  # float32's unit roundoff


@pytest.mark.parametrize(
    ("c", "o", "hw", "s"), [(16, 32, 32, 2), (3, 5, 7, 2), (4, 6, 9, 3), (8, 8, 5, 1)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_the_float64_sum(c: int, o: int, hw: int, s: int, dtype: type) -> None:
    rng = np.random.default_rng(c * 100 + hw * 10 + s)
    x = rng.standard_normal((4, c, hw, hw)).astype(dtype)
    w = rng.standard_normal((o, c, 1, 1)).astype(dtype)
    out = (hw - 1) // s + 1
    g = rng.standard_normal((4, o, out, out)).astype(dtype)
    _, gw, _ = conv.conv2d_backward(g, x, w, (s, s), (0, 0), (1, 1), 1, False, True, False)
    assert gw is not None and gw.shape == w.shape and gw.dtype == dtype
    read = x[:, :, ::s, ::s].astype(np.float64)
    want = np.einsum("noij,ncij->oc", g.astype(np.float64), read)[:, :, None, None]
    scale = np.einsum("noij,ncij->oc", np.abs(g.astype(np.float64)), np.abs(read))[:, :, None, None]
    length = 4 * out * out  # terms per sum: K
    u = U if dtype == np.float32 else 2.0**-53
    assert np.all(np.abs(gw - want) <= 8 * np.sqrt(length) * u * scale)


def test_no_ort_graph_and_same_as_with_both_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_CONV", raising=False)
    runs: list[str] = []
    run = ort_conv._run

    def spy(build: Any, args: Any, feeds: Any, threads: int) -> Any:
        runs.append(build.__name__)
        return run(build, args, feeds, threads)

    monkeypatch.setattr(ort_conv, "_run", spy)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 16, 32, 32), dtype=np.float32)
    w = rng.standard_normal((32, 16, 1, 1), dtype=np.float32)
    g = rng.standard_normal((32, 32, 16, 16), dtype=np.float32)
    _, alone, _ = conv.conv2d_backward(g, x, w, (2, 2), (0, 0), (1, 1), 1, False, True, False)
    assert "_nchwc_conv" not in runs  # the swapped-axes conv ORT would run for a 16x16 grid
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        gx, gw, _ = conv.conv2d_backward(g, x, w, (2, 2), (0, 0), (1, 1), 1, True, True, False)
        assert gx is not None and alone is not None
        np.testing.assert_array_equal(gw, alone)
