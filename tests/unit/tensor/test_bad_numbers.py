"""Numbers a dtype cannot hold, float sizes, wrongly typed arguments and huge allocations.

Each raises an ``EmberError`` naming the op, on every backend alike (issue 12, item 7): ints
beyond int64 (or int32 for an int32 tensor), NaN/inf going to an int dtype, floats where ints
are expected (never truncated), and tensors too large to allocate. The cases below were found
by ``scripts/fuzz_bad_args.py``; before the fix they escaped as raw NumPy/PyTorch errors,
Python ``TypeError``s, or were silently wrapped, truncated or saturated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em
from ember.nn import functional as F

T = em.Tensor
NAN = float("nan")
D = em.Device
Call = Callable[[D], Any]


def _i32(d: D) -> em.Tensor:
    return T.from_data([[0, 1, 2], [3, 4, 5]], device=d, dtype=em.int32)


def _i64(d: D) -> em.Tensor:
    return T.from_data([[0, 1, 2], [3, 4, 5]], device=d)


def _f(d: D) -> em.Tensor:
    return T.from_data(np.arange(12, dtype=np.float32).reshape(3, 4), device=d)


def _img(d: D) -> em.Tensor:
    return T.from_data(np.ones((1, 2, 5, 5), np.float32), device=d)


def _w2(d: D) -> em.Tensor:
    return T.from_data(np.ones((2, 2, 3, 3), np.float32), device=d)


def _seq(d: D) -> em.Tensor:
    return T.from_data(np.ones((1, 2, 5), np.float32), device=d)


def _w1(d: D) -> em.Tensor:
    return T.from_data(np.ones((2, 2, 3), np.float32), device=d)


def _ce(d: D, **kw: Any) -> em.Tensor:
    return F.cross_entropy(_f(d)[:2, :3], T.from_data([0, 1], device=d), **kw)


# name -> (call on a device, error class, message fragment)
CASES: dict[str, tuple[Call, type[em.EmberError], str]] = {
    # ints out of range, NaN to int
    "full 2**63": (lambda d: T.full((2,), 2**63, device=d), em.DTypeError, "full: the int 92233"),
    "full 2**40 int32": (
        lambda d: T.full((2,), 2**40, device=d, dtype=em.int32),
        em.DTypeError,
        "full: the value 1099511627776 does not fit int32",
    ),
    "full nan int32": (
        lambda d: T.full((2,), NAN, device=d, dtype=em.int32),
        em.DTypeError,
        "NaN/inf have no int value",
    ),
    "full inf int64": (
        lambda d: T.full((2,), math.inf, device=d, dtype=em.int64),
        em.DTypeError,
        "does not fit int64",
    ),
    "full -2**63-1 int64": (
        lambda d: T.full((2,), -(2**63) - 1, device=d, dtype="int64"),
        em.DTypeError,
        "outside the int64 range",
    ),
    "from_data 1e20 int32": (
        lambda d: T.from_data([1e20], device=d, dtype=em.int32),
        em.DTypeError,
        "outside int32's",
    ),
    "from_data 2**40 int32": (
        lambda d: T.from_data([2**40], device=d, dtype=em.int32),
        em.DTypeError,
        "outside int32's",
    ),
    "from_data 2**63": (lambda d: T.from_data([2**63], device=d), em.DTypeError, "int64's"),
    "from_data 2**64": (
        lambda d: T.from_data([1, 2**64], device=d),
        em.DTypeError,
        "outside the int64 range",
    ),
    "from_data uint64 max": (
        lambda d: em.tensor(np.uint64(2**64 - 1), device=d),
        em.DTypeError,
        "outside int64's",
    ),
    "from_data complex": (
        lambda d: T.from_data([1 + 2j], device=d, dtype=em.float32),
        em.DTypeError,
        "unsupported element type complex128",
    ),
    "from_data bytes": (
        lambda d: T.from_data([b"x"], device=d, dtype=em.int64),
        em.DTypeError,
        "unsupported element type",
    ),
    "int64 + 2**63": (lambda d: _i64(d) + 2**63, em.DTypeError, "add_scalar: the int 9223"),
    "float32 + 2**70": (lambda d: _f(d) + 2**70, em.DTypeError, "outside the int64 range"),
    "int32 + 2**40": (lambda d: _i32(d) + 2**40, em.DTypeError, "add_scalar: the value 10995"),
    "int32 * 2**31": (lambda d: _i32(d) * 2**31, em.DTypeError, "mul_scalar: the value 2147"),
    "int32 rsub -2**31-1": (lambda d: -(2**31) - 1 - _i32(d), em.DTypeError, "does not fit"),
    "int32 < 2**40": (lambda d: _i32(d) < 2**40, em.DTypeError, "lower: the value 1099511627776"),
    "int64 == 2**64": (lambda d: _i64(d) == 2**64, em.DTypeError, "equal: the int 18446"),
    "int32 clamp_min": (lambda d: _i32(d).clamp_min(2**40), em.DTypeError, "clamp: the value"),
    "int32 clamp": (lambda d: _i32(d).clamp(-(2**31) - 1, 3), em.DTypeError, "clamp: the value"),
    "int64 clamp 2**100": (lambda d: _i64(d).clamp(0, 2**100), em.DTypeError, "clamp: the int"),
    "int32 mask_fill": (
        lambda d: _i32(d).mask_fill(_i32(d) > 2, 2**40),
        em.DTypeError,
        "mask_fill: the value",
    ),
    "int64 mask_fill 2**63": (
        lambda d: _i64(d).mask_fill(_i64(d) > 2, 2**63),
        em.DTypeError,
        "mask_fill: the int",
    ),
    "full_like nan int32": (
        lambda d: T.full_like(_i32(d), NAN),
        em.DTypeError,
        "full_like: the value nan",
    ),
    "full_like 2**63 int64": (
        lambda d: T.full_like(_i64(d), 2**63),
        em.DTypeError,
        "full_like: the int",
    ),
    "full_like str": (lambda d: T.full_like(_f(d), "a"), em.DTypeError, "full_like: expected"),
    "full_like bytes int": (lambda d: T.full_like(_i32(d), b"x"), em.DTypeError, "full_like"),
    "powi negative int": (
        lambda d: _i64(d).powi_scalar(-1),
        em.DTypeError,
        "powi_scalar: an int64 tensor has no negative powers",
    ),
    "powi int32 2**31": (
        lambda d: _i32(d).powi_scalar(2**31),
        em.DTypeError,
        "powi_scalar: the value 2147483648 does not fit int32",
    ),
    "repeat_dim 10**400": (
        lambda d: _f(d).repeat_dim(0, 10**400),
        em.ShapeError,
        "(over 1024 ZiB), more than any device can address",
    ),
    "pow 2**63": (lambda d: _i64(d) ** 2**63, em.DTypeError, "the int 9223372036854775808"),
    "arange 2**63": (lambda d: T.arange(0, 2**63, device=d), em.DTypeError, "arange: the bound"),
    # float sizes, wrong argument types
    "zeros 2.5": (
        lambda d: T.zeros((2.5,), device=d),
        em.DTypeError,
        "zeros: expected an int size, got 2.5",
    ),
    "zeros 2.0": (lambda d: T.zeros((2.0, 3), device=d), em.DTypeError, "never rounded"),
    "ones float": (lambda d: T.ones(2.0, device=d), em.DTypeError, "ones: expected a shape"),
    "empty None": (lambda d: T.empty(None, device=d), em.DTypeError, "empty: expected a shape"),
    "zeros str": (lambda d: T.zeros("ab", device=d), em.DTypeError, "zeros: expected a shape"),
    "zeros bool size": (lambda d: T.zeros((True,), device=d), em.DTypeError, "got True"),
    "zeros 2**64": (lambda d: T.zeros((2**64, 0), device=d), em.ShapeError, "below 2**63"),
    "random float size": (
        lambda d: T.random((2.5,), em.Distribution.uniform(), device=d),
        em.DTypeError,
        "random: expected an int size",
    ),
    "random not a distribution": (
        lambda d: T.random((2,), 3, device=d),
        em.DTypeError,
        "random: expected an em.Distribution",
    ),
    "uniform None": (lambda d: em.Distribution.uniform(None, 1.0), em.DTypeError, "low"),
    "normal huge std": (lambda d: em.Distribution.normal(0, 10**400), em.ShapeError, "float range"),
    "bernoulli tuple": (lambda d: em.Distribution.bernoulli((0.5,)), em.DTypeError, "p to be"),
    "seed -1": (lambda d: em.seed(-1), em.ShapeError, "seed: expected n >= 0, got -1"),
    "seed 2**64": (lambda d: em.seed(2**64), em.ShapeError, "seed: expected n <= 1844674"),
    "seed 1.5": (lambda d: em.seed(1.5), em.DTypeError, "seed: expected an int n"),
    "seed str": (lambda d: em.seed("a"), em.DTypeError, "seed: expected an int n"),
    "seed None": (lambda d: em.seed(None), em.DTypeError, "seed: expected an int n"),
    "reshape float": (lambda d: _f(d).reshape((6.0, 2)), em.DTypeError, "reshape: expected"),
    "reshape inf": (lambda d: _f(d).reshape((-math.inf, -1)), em.DTypeError, "reshape"),
    "permute None": (
        lambda d: _f(d).permute(None),
        em.DTypeError,
        "permute: expected a sequence of int dims, got None",
    ),
    "permute int": (lambda d: _f(d).permute(np.int64(1)), em.DTypeError, "permute: expected"),
    "permute float": (lambda d: _f(d).permute((1.0, 0)), em.DTypeError, "dim must be an int"),
    "flip None": (lambda d: _f(d).flip(None), em.DTypeError, "flip: expected a sequence"),
    "expand bool": (lambda d: _f(d).expand(True), em.DTypeError, "expand: expected a shape"),
    "expand float": (lambda d: _f(d).expand((3.0, 4)), em.DTypeError, "expand: expected"),
    "expand -inf": (lambda d: _f(d).expand((-math.inf, 4)), em.DTypeError, "expand"),
    "narrow float": (
        lambda d: _f(d).narrow(1, 1.0, 1),
        em.DTypeError,
        "narrow: expected an int start",
    ),
    "chunk float": (lambda d: _f(d).chunk(2.0), em.DTypeError, "chunk: expected an int chunks"),
    "split None": (lambda d: _f(d).split(None), em.DTypeError, "split: expected an int split_size"),
    "tril 2**63": (lambda d: _f(d).tril(2**63), em.ShapeError, "tril: expected diagonal <="),
    "sum_dim float": (lambda d: _f(d).sum_dim(1.0), em.DTypeError, "sum_dim: dim must be an int"),
    "unsqueeze None": (lambda d: _f(d).unsqueeze_dim(None), em.DTypeError, "unsqueeze_dim: dim"),
    # nn.functional argument types
    "conv2d stride 1.5": (
        lambda d: F.conv2d(_img(d), _w2(d), stride=1.5),
        em.DTypeError,
        "conv2d: expected an int stride, got 1.5 (float)",
    ),
    "conv2d stride huge": (
        lambda d: F.conv2d(_img(d), _w2(d), stride=10**30),
        em.ShapeError,
        "conv2d: expected stride >= 1 (and at most 2**62)",
    ),
    "conv2d padding None": (
        lambda d: F.conv2d(_img(d), _w2(d), padding=None),
        em.DTypeError,
        "conv2d: expected an int padding",
    ),
    "conv2d padding huge": (
        lambda d: F.conv2d(_img(d), _w2(d), padding=2**40),
        em.ShapeError,
        "conv2d: a tensor of shape",
    ),
    "conv2d groups float": (
        lambda d: F.conv2d(_img(d), _w2(d), groups=1.5),
        em.DTypeError,
        "conv2d: expected an int groups",
    ),
    "conv1d stride 1.5": (
        lambda d: F.conv1d(_seq(d), _w1(d), stride=1.5),
        em.DTypeError,
        "conv1d: expected an int stride",
    ),
    "conv1d padding object": (
        lambda d: F.conv1d(_seq(d), _w1(d), padding=object()),
        em.DTypeError,
        "conv1d: expected an int padding",
    ),
    "max_pool2d kernel 2.5": (
        lambda d: F.max_pool2d(_img(d), 2.5),
        em.DTypeError,
        "max_pool2d: expected an int kernel_size",
    ),
    "max_pool2d dilation None": (
        lambda d: F.max_pool2d(_img(d), 2, dilation=None),
        em.DTypeError,
        "max_pool2d: expected an int dilation",
    ),
    "avg_pool2d padding float": (
        lambda d: F.avg_pool2d(_img(d), 2, padding=0.5),
        em.DTypeError,
        "avg_pool2d: expected an int padding",
    ),
    "avg_pool2d stride float": (
        lambda d: F.avg_pool2d(_img(d), 2, stride=np.float64(2.0)),
        em.DTypeError,
        "avg_pool2d: expected an int stride",
    ),
    "adaptive_avg_pool2d float": (
        lambda d: F.adaptive_avg_pool2d(_img(d), 2.5),
        em.DTypeError,
        "adaptive_avg_pool2d: expected an int output_size",
    ),
    "dropout p None": (
        lambda d: F.dropout(_f(d), p=None),
        em.DTypeError,
        "dropout: expected p (a probability) to be a real number, got None",
    ),
    "dropout p list": (lambda d: F.dropout(_f(d), p=[0.5]), em.DTypeError, "dropout: expected"),
    "dropout training": (
        lambda d: F.dropout(_f(d), 0.5, training="yes"),
        em.DTypeError,
        "dropout: expected training to be a bool",
    ),
    "embedding 2**63": (
        lambda d: F.embedding(T.full((2,), 2**63, device=d), _f(d)),
        em.DTypeError,
        "full: the int",
    ),
    "cross_entropy ignore_index None": (
        lambda d: _ce(d, ignore_index=None),
        em.DTypeError,
        "cross_entropy: expected an int ignore_index",
    ),
    "cross_entropy label_smoothing list": (
        lambda d: _ce(d, label_smoothing=[0.1]),
        em.DTypeError,
        "cross_entropy: expected label_smoothing",
    ),
    "huber delta None": (
        lambda d: F.huber_loss(_f(d), _f(d), delta=None),
        em.DTypeError,
        "huber_loss: expected delta",
    ),
    "smooth_l1 beta str": (
        lambda d: F.smooth_l1_loss(_f(d), _f(d), beta="1"),
        em.DTypeError,
        "smooth_l1_loss: expected beta",
    ),
    "layer_norm shape float": (
        lambda d: F.layer_norm(_f(d), 4.0),
        em.DTypeError,
        "layer_norm: expected",
    ),
    "layer_norm eps list": (
        lambda d: F.layer_norm(_f(d), 4, eps=[1e-5]),
        em.DTypeError,
        "layer_norm: expected eps",
    ),
    # allocations no memory holds, refused before the backend tries
    "zeros 2**40 squared": (
        lambda d: T.zeros((2**40, 2**40), device=d),
        em.ShapeError,
        "needs 4835703278458516698824704 bytes",
    ),
    "empty 2**62": (
        lambda d: T.empty((2**62,), device=d),
        em.ShapeError,
        "empty: a tensor of shape (4611686018427387904,) and dtype float32 needs",
    ),
    "arange 2**63 values": (
        lambda d: T.arange(-(2**62), 2**62, device=d),
        em.ShapeError,
        "arange: a tensor of shape (9223372036854775808,)",
    ),
    "repeat_dim huge": (
        lambda d: _f(d).repeat_dim(0, 2**62),
        em.ShapeError,
        "repeat_dim: a tensor of shape",
    ),
    "one_hot huge": (
        lambda d: _i64(d).one_hot(2**62),
        em.ShapeError,
        "one_hot: a tensor of shape (2, 3, 4611686018427387904)",
    ),
    "random huge": (
        lambda d: T.random((2**40, 2**40), em.Distribution.normal(), device=d),
        em.ShapeError,
        "random: a tensor of shape",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_number_raises_an_ember_error(device: em.Device, name: str) -> None:
    call, error, fragment = CASES[name]
    with pytest.raises(error, match=re.escape(fragment)) as info:
        call(device)
    assert isinstance(info.value, em.EmberError)


def test_a_failed_seed_changes_nothing(device: em.Device) -> None:
    em.seed(3)
    want = T.random((4,), em.Distribution.uniform(), device=device).tolist()
    em.seed(3)
    with pytest.raises(em.ShapeError):
        em.seed(-1)
    assert T.random((4,), em.Distribution.uniform(), device=device).tolist() == want


@pytest.mark.parametrize(
    "error",
    [MemoryError("Unable to allocate 4.00 TiB"), "torch"],
    ids=["MemoryError", "torch OutOfMemoryError"],
)
@pytest.mark.parametrize("make", ["full", "empty", "uniform"])
def test_an_allocator_refusal_becomes_a_shape_error(
    device: em.Device, monkeypatch: pytest.MonkeyPatch, error: Any, make: str
) -> None:
    """A size the address space holds but the allocator refuses (MemoryError, PyTorch's OOM)."""
    if error == "torch":
        torch = pytest.importorskip("torch")
        error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 TiB")

    def refuse(*args: Any) -> Any:
        raise error

    monkeypatch.setattr(device._plain.b, make, refuse)
    calls: dict[str, Callable[[], Any]] = {
        "full": lambda: T.zeros((2**20, 2**20), device=device),
        "empty": lambda: T.empty((2**20, 2**20), device=device),
        "uniform": lambda: T.random((2**20, 2**20), em.Distribution.uniform(), device=device),
    }
    with pytest.raises(em.ShapeError, match=r"needs 4398046511104 bytes \(4\.0 TiB\)") as info:
        calls[make]()
    assert info.value.__cause__ is error


def test_an_unrelated_runtime_error_is_not_reported_as_memory(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("some kernel bug")

    monkeypatch.setattr(device._plain.b, "full", broken)
    with pytest.raises(RuntimeError, match="some kernel bug"):
        T.zeros((2,), device=device)


# what stays accepted, with the same result on every backend
ACCEPTED: dict[str, tuple[Call, Any]] = {
    "numpy int sizes": (lambda d: T.zeros((np.int64(2), 3), device=d).shape, (2, 3)),
    "numpy array shape": (lambda d: T.zeros(np.array([2, 3]), device=d).shape, (2, 3)),
    "int32 extremes": (
        lambda d: T.full((1,), -(2**31), device=d, dtype=em.int32).tolist(),
        [-(2**31)],
    ),
    "int64 extremes": (lambda d: T.from_data([2**63 - 1, -(2**63)], device=d).tolist(), None),
    "float to int truncates": (lambda d: T.full((1,), 2.9, device=d, dtype=em.int32).tolist(), [2]),
    "arange empty": (lambda d: T.arange(-1, device=d).tolist(), []),
    "arange backwards empty": (lambda d: T.arange(0, 5, -1, device=d).tolist(), []),
    "float16 fill beyond range is inf": (
        lambda d: T.full((1,), 1e300, device=d, dtype=em.float16).tolist(),
        [math.inf],
    ),
    "lifted float beyond float32 is inf": (
        lambda d: (T.from_data([1, 2], device=d, dtype=em.int32) * -1e300).tolist(),
        [-math.inf] * 2,
    ),
    "float32 clamp beyond range": (lambda d: _f(d).clamp(-1e300, 1e300).tolist()[0], [0, 1, 2, 3]),
    "conv2d numpy stride": (
        lambda d: F.conv2d(_img(d), _w2(d), stride=np.int64(2)).shape,
        (1, 2, 2, 2),
    ),
    "pool numpy stride": (
        lambda d: F.max_pool2d(_img(d), 2, stride=np.int64(2)).shape,
        (1, 2, 2, 2),
    ),
    "seed top of range": (lambda d: em.seed(2**64 - 1), None),
    "seed numpy int": (lambda d: em.seed(np.int64(5)), None),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_in_range_arguments_still_work(device: em.Device, name: str) -> None:
    call, want = ACCEPTED[name]
    got = call(device)
    if want is not None:
        assert got == want
    em.seed(0)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # NumPy's cast warning
def test_a_numerator_beyond_the_dtype_divides_to_inf(device: em.Device) -> None:
    # torch's scalar_tensor refused 1e300 as a float32 numerator with a raw RuntimeError
    x = T.ones((2,), device=device)
    assert (1e300 / x).tolist() == [math.inf, math.inf]
    assert (-1e300 / x).tolist() == [-math.inf, -math.inf]
