"""Gradients of narrow / split pieces are summed lazily and joined with one concatenation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember.ops.slicegrad import SliceGrad

W = np.arange(24, dtype=np.float64).reshape(2, 12) / 10


def _leaf(device: em.Device) -> em.Tensor:
    return em.Tensor.from_data(W, device=device.autodiff()).require_grad()


def _spy(device: em.Device, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"cat": 0, "index_put_zeros": 0}
    b = device.b
    for name in calls:
        real = getattr(b, name)

        def spy(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(b, name, spy)
    return calls


def test_split_pieces_are_joined_with_one_cat(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = _leaf(device)
    q, k, v = x.split(4, 1)
    calls = _spy(device, monkeypatch)
    grads = (q * 1.0 + (k * k).exp() * 0.0 + k * 2.0 + v * 3.0).sum().backward()
    assert calls == {"cat": 1, "index_put_zeros": 0}
    want = np.concatenate([np.ones((2, 4)), np.full((2, 4), 2.0), np.full((2, 4), 3.0)], 1)
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), want)  # type: ignore[union-attr]


def test_pieces_that_do_not_tile_are_zero_padded_and_summed(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = _leaf(device)
    a = x.narrow(1, 0, 5)
    c = x.narrow(1, 3, 5)  # overlaps a
    e = x.narrow(1, 10, 2)  # leaves a gap before it
    calls = _spy(device, monkeypatch)
    grads = (a * 1.0 + c * 2.0).sum().add(e.sum() * 4.0).backward()
    assert calls == {"cat": 0, "index_put_zeros": 3}
    want = np.zeros((2, 12))
    want[:, 0:5] += 1.0
    want[:, 3:8] += 2.0
    want[:, 10:12] += 4.0
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), want)  # type: ignore[union-attr]


def test_a_piece_and_a_dense_use_add_up_in_either_order(device: em.Device) -> None:
    for piece_first in (True, False):
        x = _leaf(device)
        piece = x.narrow(1, 2, 4).sum() * 3.0
        dense = (x * 2.0).sum()
        loss = piece + dense if piece_first else dense + piece
        g = x.grad(loss.backward())
        want = np.full((2, 12), 2.0)
        want[:, 2:6] += 3.0
        np.testing.assert_array_equal(g.to_numpy(), want)  # type: ignore[union-attr]


def test_negative_and_open_slices_keep_the_padded_path(device: em.Device) -> None:
    x = _leaf(device)
    grads = (x[:, -3:].sum() + x[:, 1:4].sum() * 2.0).backward()
    want = np.zeros((2, 12))
    want[:, 9:] = 1.0
    want[:, 1:4] = 2.0
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), want)  # type: ignore[union-attr]


def test_slice_grad_dense_matches_zero_padding() -> None:
    b = em.Device.cpu().b
    parts = [np.ones((2, 3)), np.full((2, 2), 5.0)]
    g = SliceGrad(b, (2, 5), 1, 3, parts[1]) + SliceGrad(b, (2, 5), 1, 0, parts[0])
    assert isinstance(g, SliceGrad) and len(g.parts) == 2
    np.testing.assert_array_equal(g.dense(), np.concatenate(parts, 1))
    dense = np.ones((2, 5)) + SliceGrad(b, (2, 5), 1, 1, np.ones((2, 2)))
    np.testing.assert_array_equal(dense, [[1, 2, 2, 1, 1]] * 2)
