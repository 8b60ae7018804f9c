"""Quantize -> dequantize against hand formulas and torch's own quantizer; QuantScheme values;
the autodiff rules of SEMANTICS.md §11; a clear error for every op a quantized tensor refuses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember.quantization import QuantizedTensor

S = em.QuantScheme
GRANULARITIES: list[Any] = ["tensor", ("channel", 0), ("channel", 1), ("block", 4)]


def _hand(x: np.ndarray, mode: str, g: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values, scales (broadcastable to x) and zero points by the formulas of quantize()."""
    x = x.astype(np.float32)
    if g == "tensor":
        axes: tuple[int, ...] = tuple(range(x.ndim))
        groups = x
    elif g[0] == "channel":
        axes = tuple(i for i in range(x.ndim) if i != g[1])
        groups = x
    else:
        groups = x.reshape(*x.shape[:-1], x.shape[-1] // g[1], g[1])
        axes = (groups.ndim - 1,)
    if mode == "symmetric":
        amax = np.abs(groups).max(axis=axes, keepdims=True)
        s = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(np.float32)
        z = np.zeros_like(s)
        q = np.clip(np.round(groups / s), -127, 127)
    else:
        lo = np.minimum(groups.min(axis=axes, keepdims=True), 0)
        hi = np.maximum(groups.max(axis=axes, keepdims=True), 0)
        s = ((hi - lo) / np.float32(255)).astype(np.float32)
        s = np.where(s == 0, np.float32(1), s)
        z = np.clip(-128 - np.round(lo / s), -128, 127)
        q = np.clip(np.round(groups / s) + z, -128, 127)
    shape = x.shape
    if g != "tensor" and g[0] == "block":
        return (
            q.reshape(shape),
            np.broadcast_to(s, groups.shape).reshape(shape),
            np.broadcast_to(z, groups.shape).reshape(shape),
        )
    return q, s, z


@pytest.mark.parametrize("mode", ["symmetric", "affine"])
@pytest.mark.parametrize("g", GRANULARITIES, ids=str)
def test_values_and_error_bound(device: em.Device, mode: str, g: Any) -> None:
    rng = np.random.default_rng(0)
    a = (rng.normal(size=(6, 8)) * rng.uniform(0.1, 3.0, size=(6, 1))).astype(np.float32)
    q = em.tensor(a, device=device).quantize(S(mode=mode, granularity=g))
    assert isinstance(q, QuantizedTensor) and q.dtype is em.int8 and q.shape == a.shape
    want_q, s, z = _hand(a, mode, g)
    np.testing.assert_array_equal(q._values.to_numpy(), want_q.astype(np.int8))
    back = q.dequantize()
    assert back.dtype is em.float32 and not back.is_tracked()
    err = np.abs(back.to_numpy() - a)
    # round to nearest: half a step; the float32 product (q - z) * s adds an ulp or two
    bound = (s / 2 if mode == "symmetric" else s) * (1 + 1e-6)
    assert (err <= bound).all(), float((err / s).max())
    np.testing.assert_array_equal(back.to_numpy(), ((want_q - z) * s).astype(np.float32))


@pytest.mark.parametrize("dtype", [em.float64, em.float16, em.bfloat16])
def test_dequantize_gives_the_original_dtype(device: em.Device, dtype: em.DType) -> None:
    x = em.tensor([[0.5, -1.5, 2.0, 0.0]], device=device, dtype=dtype)
    q = x.quantize(S(granularity=("channel", 0)))
    assert q.float_dtype is dtype and q.dequantize().dtype is dtype
    step = 2.0 / 127
    tol = step / 2 + (2.0**-7 * 2 if dtype is em.bfloat16 else 2.0**-10 * 2)
    np.testing.assert_allclose(
        q.dequantize().cast(em.float64).to_numpy(), x.cast(em.float64).to_numpy(), atol=tol
    )


# torch deprecates its quantized tensors (a UserWarning) but still has them
TORCH_QUANTIZED = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")


@TORCH_QUANTIZED
@pytest.mark.parametrize("mode", ["symmetric", "affine"])
def test_integer_values_match_torch_quantize_per_channel(mode: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a = rng.normal(size=(16, 32)).astype(np.float32)
    q = em.tensor(a).quantize(S(mode=mode, granularity=("channel", 0)))
    s = q._scales.to_numpy().reshape(-1).astype(np.float64)
    z = np.zeros(16, dtype=np.int64) if q._zeros is None else q._zeros.to_numpy().reshape(-1)
    lo = -127 if mode == "symmetric" else -128
    tq = torch.quantize_per_channel(
        torch.from_numpy(a),
        torch.from_numpy(s),
        torch.from_numpy(z.astype(np.int64)),
        0,
        torch.qint8,
    )
    want = np.clip(tq.int_repr().numpy(), lo, 127)  # torch's range is [-128, 127]
    got = q._values.to_numpy()
    # torch multiplies by 1/scale, ember divides: they may differ by one at an exact tie
    diff = np.abs(got.astype(np.int32) - want)
    assert diff.max() <= 1 and (diff == 0).mean() > 0.999
    np.testing.assert_allclose(
        q.dequantize().to_numpy(), tq.dequantize().numpy(), atol=s.max() * 1.01
    )


@TORCH_QUANTIZED
def test_per_tensor_matches_torch_quantize_per_tensor() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a = rng.normal(size=(64,)).astype(np.float32)
    q = em.tensor(a).quantize(S(mode="affine"))
    s, z = float(q._scales.item()), int(q._zeros.item())  # type: ignore[union-attr]
    tq = torch.quantize_per_tensor(torch.from_numpy(a), s, z, torch.qint8)
    diff = np.abs(q._values.to_numpy().astype(np.int32) - tq.int_repr().numpy())
    assert diff.max() <= 1 and (diff == 0).mean() > 0.99


# ---------------------------------------------------------------- the scheme
def test_scheme_is_a_value() -> None:
    a, b = S(granularity=("channel", 0)), S(em.int8, "symmetric", ["channel", 0])
    assert a == b and hash(a) == hash(b) and a != S()
    assert S.from_json(S(mode="affine", granularity=("block", 32)).to_json()) == S(
        mode="affine", granularity=("block", 32)
    )
    assert (a.channel_axis, a.block, S(granularity=("block", 8)).block) == (0, None, 8)
    with pytest.raises(AttributeError):
        a.mode = "affine"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, err",
    [
        ({"dtype": em.int32}, em.DTypeError),
        ({"mode": "asymmetric"}, em.DTypeError),
        ({"granularity": "row"}, em.DTypeError),
        ({"granularity": ("channel", 1.0)}, em.DTypeError),
        ({"granularity": ("block", 0)}, em.ShapeError),
    ],
)
def test_bad_schemes(kwargs: dict[str, Any], err: type[Exception]) -> None:
    with pytest.raises(err, match="QuantScheme"):
        S(**kwargs)


def test_bad_quantize_calls() -> None:
    with pytest.raises(em.DTypeError, match="quantize: expected a float tensor, got int64"):
        em.tensor([1, 2]).quantize(S())
    with pytest.raises(em.DTypeError, match=r"expected an em\.QuantScheme"):
        em.tensor([1.0]).quantize("int8")  # type: ignore[arg-type]
    with pytest.raises(em.ShapeError, match="block size of 3 must divide the last dim"):
        em.Tensor.zeros((2, 8)).quantize(S(granularity=("block", 3)))
    with pytest.raises(em.ShapeError, match="rank >= 1"):
        em.tensor(1.0).quantize(S(granularity=("channel", 0)))
    with pytest.raises(em.ShapeError, match="quantize"):
        em.Tensor.zeros((2, 8)).quantize(S(granularity=("channel", 2)))


def test_zeros_and_empty_tensors() -> None:
    q = em.Tensor.zeros((3, 4)).quantize(S(granularity=("channel", 0)))
    assert q.dequantize().tolist() == [[0.0] * 4] * 3 and q._scales.tolist() == [[1.0]] * 3
    e = em.Tensor.zeros((0, 4)).quantize(S(mode="affine", granularity=("channel", 1)))
    assert e.dequantize().shape == (0, 4)


# ---------------------------------------------------------------- SEMANTICS.md §11
def test_never_tracked_and_lineage_ops_return_it(device: em.Device) -> None:
    x = em.tensor([[1.0, -2.0]], device=device.autodiff()).require_grad()
    q = x.quantize(S())
    assert q.is_autodiff() and not q.is_tracked() and not q.is_require_grad()
    assert q.require_grad() is q
    assert q.set_require_grad(True) is q and q.set_require_grad(False) is q
    assert q.detach() is q
    assert q.gradient_checkpointing_strategy() is x.gradient_checkpointing_strategy()
    assert q.to_device(device) is q
    d = q.dequantize()
    assert d.is_autodiff() and not d.is_tracked() and d.dtype is em.float32
    assert q.without_autodiff().without_autodiff().is_autodiff() is False
    assert q.without_autodiff().autodiff().gradient_checkpointing_strategy() is not None
    assert q.grad(x.sum().backward()) is None
    with pytest.raises(em.DTypeError, match="expected a bool"):
        q.set_require_grad(1)  # type: ignore[arg-type]


def test_to_device_keeps_the_context_and_the_values() -> None:
    pytest.importorskip("torch")
    x = em.tensor(
        [[1.0, -2.0], [0.5, 4.0]], device=em.Device.cpu().autodiff().gradient_checkpointing()
    )
    q = x.quantize(S(mode="affine", granularity=("channel", 1)))
    moved = q.to_device(em.Device.torch("cpu"))
    assert moved.device.without_autodiff() == em.Device.torch("cpu")
    assert moved.gradient_checkpointing_strategy() is q.gradient_checkpointing_strategy()
    assert moved.scheme == q.scheme and moved.is_quantized()
    np.testing.assert_array_equal(moved.dequantize().to_numpy(), q.dequantize().to_numpy())


# ---------------------------------------------------------------- refused ops
REFUSED = {
    "add": lambda q, x: q + x,
    "add_scalar": lambda q, x: x + q,
    "sub": lambda q, x: 1.0 - q,
    "mul": lambda q, x: q * 2.0,
    "mul_scalar": lambda q, x: x.mul(q),
    "div": lambda q, x: q / x,
    "neg": lambda q, x: -q,
    "equal": lambda q, x: q == x,
    "greater": lambda q, x: q > 0.0,
    "exp": lambda q, x: q.exp(),
    "sum": lambda q, x: q.sum(),
    "mean_dim": lambda q, x: q.mean_dim(0),
    "cast": lambda q, x: q.cast(em.float32),
    "to_numpy": lambda q, x: q.to_numpy(),
    "item": lambda q, x: q[0, 0].item(),
    "relu": lambda q, x: em.nn.functional.relu(q),
    "softmax": lambda q, x: em.nn.functional.softmax(q, -1),
    "mse_loss": lambda q, x: em.nn.functional.mse_loss(q, x),
    "cat": lambda q, x: em.Tensor.cat([x, q]),
    "__array__": lambda q, x: np.asarray(q),
    "expand": lambda q, x: q.expand((3, 2, 2)),
    "flip": lambda q, x: q.flip(0),
}


@pytest.mark.parametrize("op", list(REFUSED))
def test_every_other_op_raises_naming_it(op: str) -> None:
    x = em.tensor([[1.0, 2.0], [3.0, 4.0]])
    q = x.quantize(S())
    with pytest.raises(em.DTypeError, match="dequantize") as info:
        REFUSED[op](q, x)
    assert str(info.value).startswith(op), str(info.value)


def test_missing_names_stay_attribute_errors() -> None:
    q = em.tensor([1.0]).quantize(S())
    assert not hasattr(q, "exp") and hasattr(q, "reshape")
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        q.nonsense  # noqa: B018
