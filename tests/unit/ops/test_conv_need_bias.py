"""A convolution without bias asks its backend for no bias gradient (``need_bias``), on every
backend; with a bias it gets the usual one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember.nn import functional as F


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("has_bias", [False, True])
def test_bias_gradient_only_for_a_bias(
    device: em.Device, transposed: bool, has_bias: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = device.autodiff()
    name = "conv_transpose2d_backward" if transposed else "conv2d_backward"
    cls = type(dev.b)
    kernel = getattr(cls, name)
    asked: list[bool] = []

    def spy(*args: Any) -> Any:
        asked.append(args[-1])
        out = kernel(*args)
        assert (out[2] is None) == (not args[-1])
        return out

    monkeypatch.setattr(cls, name, staticmethod(spy))
    rng = np.random.default_rng(3)
    x = em.tensor(rng.normal(size=(2, 3, 6, 6)), device=dev).require_grad()
    w = em.tensor(rng.normal(size=(3, 4, 3, 3) if transposed else (4, 3, 3, 3)), device=dev)
    w = w.require_grad()
    b = em.tensor(rng.normal(size=(4,)), device=dev).require_grad() if has_bias else None
    conv = F.conv_transpose2d if transposed else F.conv2d
    grads = conv(x, w, b, padding=1).sum().backward()  # (2, 4, 6, 6): d/db = 2 * 36 each
    assert asked == [has_bias]
    if b is not None:
        np.testing.assert_allclose(b.grad(grads).to_numpy(), np.full(4, 72.0))
    assert w.grad(grads) is not None and x.grad(grads) is not None
