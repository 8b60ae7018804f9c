"""The max-pool backward's batch split (``pooling._SPLIT_BACKWARD``): inputs below it stay on
the calling thread, larger ones split between the pool's threads with the bits of one thread."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels import pooling
from ember.backend.numpy.kernels import threads as pool

GEO = ((2, 2), (2, 2), (0, 0), (1, 1))


def _submits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    submit = pool._submit

    def counted(fn: object, *args: object) -> object:
        calls.append(1)
        return submit(fn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "_submit", counted)
    return calls


@pytest.mark.parametrize(
    ("shape", "split"),
    [((64, 6, 28, 28), False), ((64, 32, 28, 28), True)],  # LeNet's first pool, the CNN's
)
def test_split_only_from_the_threshold(
    shape: tuple[int, ...], split: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (np.prod(shape) >= pooling._SPLIT_BACKWARD) == split
    rng = np.random.default_rng(3)
    # after a ReLU: many windows tie at zero, where the first tap takes the gradient
    x = np.maximum(rng.standard_normal(shape, dtype=np.float32), 0)
    g = rng.standard_normal((*shape[:2], shape[2] // 2, shape[3] // 2), dtype=np.float32)
    got = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBER_NUM_THREADS", threads)
        calls = _submits(monkeypatch)
        got[threads] = pooling.max_pool2d_backward(g, x, *GEO)
        assert len(calls) == (1 if split and threads == "2" else 0)
    np.testing.assert_array_equal(got["1"], got["2"])
    # each window's gradient lands on exactly one of its taps
    per_window = (got["1"] != 0).reshape(*g.shape[:2], g.shape[2], 2, g.shape[3], 2).sum((3, 5))
    assert np.array_equal(per_window, (g != 0).astype(per_window.dtype))
