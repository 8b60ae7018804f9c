"""Layout ops keep the quantization: each equals the same op on the dequantized tensor, bit for
bit, and the channel / block axis moves with the values; cutting a block, splitting an axis
with its own scales or joining different scales is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em

S = em.QuantScheme
Op = Callable[[Any], Any]

OPS: dict[str, Op] = {
    "permute": lambda t: t.permute((2, 0, 1)),
    "swap_dims": lambda t: t.swap_dims(0, 2),
    "transpose": lambda t: t.transpose(),
    "T": lambda t: t.T,
    "slice": lambda t: t[1:3],
    "slice_step": lambda t: t[::2, 1:],
    "int": lambda t: t[:, 2],
    "ellipsis": lambda t: t[..., 4:8],
    "none": lambda t: t[None, 1, :, 4:],
    "slice_method": lambda t: t.slice([slice(0, 2), slice(1, 4)]),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "unsqueeze": lambda t: t.unsqueeze_dim(0),
    "squeeze": lambda t: t[:1].squeeze_dim(0),
    "reshape_lead": lambda t: t.reshape((1, 4, 6, 8)),
    "flatten_lead": lambda t: t.transpose().flatten(0, 0),
    "chain": lambda t: t.transpose()[1:3].reshape((1, 2, 8, 6)),
}
GRANULARITIES: list[Any] = ["tensor", ("channel", 0), ("channel", 1), ("block", 4)]


def _pair(device: em.Device, mode: str, g: Any) -> tuple[Any, em.Tensor]:
    rng = np.random.default_rng(3)
    x = em.tensor(rng.normal(size=(4, 6, 8)).astype(np.float32), device=device)
    q = x.quantize(S(mode=mode, granularity=g))
    return q, q.dequantize()


def _same(q: Any, ref: em.Tensor) -> None:
    assert q.is_quantized() and q.shape == ref.shape
    np.testing.assert_array_equal(q.dequantize().to_numpy(), ref.to_numpy())


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("mode", ["symmetric", "affine"])
@pytest.mark.parametrize("g", GRANULARITIES, ids=str)
def test_layout_op_equals_the_op_on_the_dequantized(
    device: em.Device, g: Any, mode: str, op: str
) -> None:
    q, d = _pair(device, mode, g)
    _same(OPS[op](q), OPS[op](d))


@pytest.mark.parametrize("g", GRANULARITIES, ids=str)
def test_select_and_cat(device: em.Device, g: Any) -> None:
    q, d = _pair(device, "affine", g)
    idx = em.tensor([0, 5, 5, 2], device=device)
    _same(q.select(1, idx), d.select(1, idx))
    _same(q.cat([q[:1], q[1:]], 0), d)
    _same(q[:1].select(0, em.tensor([0, 0], device=device)), d[:1].select(0, idx[:2] * 0))
    _same(q.cat([q[:, :, :4], q[:, :, 4:]], 2), d)


def test_the_channel_axis_follows_the_values() -> None:
    q = em.Tensor.ones((4, 6, 8)).quantize(S(granularity=("channel", 1)))
    assert q.permute((1, 2, 0)).scheme.granularity == ("channel", 0)
    assert q.transpose().scheme.granularity == ("channel", 2)
    assert q.unsqueeze_dim(0).scheme.granularity == ("channel", 2)
    assert q[:, 3].scheme.granularity == "tensor"  # one channel left: one scale
    b = em.Tensor.ones((4, 8)).quantize(S(granularity=("block", 4)))
    assert b.transpose().axis == 0 and b.transpose().scheme == b.scheme


def test_a_linear_weight_transposed_keeps_one_scale_per_output() -> None:
    w = em.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) - 5)
    q = w.quantize(S(granularity=("channel", 0)))
    assert q.T._scales.shape == (1, 3)


@pytest.mark.parametrize(
    "op, err, match",
    [
        (lambda q: q[:, :, 2:6], em.ShapeError, "cuts its blocks of 4"),
        (lambda q: q[:, :, ::2], em.ShapeError, "cuts its blocks"),
        (lambda q: q.narrow(2, 1, 4), em.ShapeError, "cuts its blocks"),
        (lambda q: q[:, :, 3], em.ShapeError, "int index"),
        (lambda q: q.select(2, em.tensor([0, 1])), em.ShapeError, "blocks of 4"),
        (lambda q: q.reshape((4, 6, 2, 4)), em.ShapeError, "split or merge axis 2"),
        (lambda q: q.flatten(), em.ShapeError, "split or merge"),
        (lambda q: q[em.tensor([0, 1])], em.DTypeError, "basic keys"),
    ],
)
def test_block_cuts_are_refused(op: Op, err: type[Exception], match: str) -> None:
    q = em.Tensor.ones((4, 6, 8)).quantize(S(granularity=("block", 4)))
    with pytest.raises(err, match=match):
        op(q)


def test_reshape_must_keep_a_channel_axis_whole() -> None:
    q = em.Tensor.ones((4, 6)).quantize(S(granularity=("channel", 1)))
    assert q.reshape((2, 2, 6)).scheme.granularity == ("channel", 2)
    with pytest.raises(em.ShapeError, match="split or merge axis 1"):
        q.reshape((4, 2, 3))
    t = em.Tensor.ones((4, 6)).quantize(S())
    assert t.reshape((24,)).shape == (24,)  # one scale: any reshape


def test_cat_refuses_different_shared_scales_and_schemes() -> None:
    rng = np.random.default_rng(4)
    a = em.tensor(rng.normal(size=(2, 4)).astype(np.float32))
    b = em.tensor(rng.normal(size=(2, 4)).astype(np.float32) * 3)
    qa, qb = a.quantize(S(granularity=("channel", 0))), b.quantize(S(granularity=("channel", 0)))
    assert qa.cat([qa, qb], 0).shape == (4, 4)  # along the channel axis: scales joined
    with pytest.raises(em.DTypeError, match="other scales than operand 0 along dim 1"):
        qa.cat([qa, qb], 1)
    with pytest.raises(em.DTypeError, match="share one scheme"):
        qa.cat([qa, b.quantize(S())], 0)
    with pytest.raises(em.DTypeError, match="quantized tensors only"):
        qa.cat([qa, a], 0)
