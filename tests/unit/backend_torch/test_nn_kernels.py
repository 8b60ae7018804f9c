"""The torch backend's fused nn kernels agree with the NumPy backend's, forward and backward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from helpers.rules import rule_grads
from helpers.tolerance import attention_tolerance

import ember as em
from ember.backend.families.fused import FusedBackwards
from ember.backend.families.optional import OptionalKernels

torch = pytest.importorskip("torch")

NP = em.Device.cpu().b
TB = em.Device.torch("cpu").b
_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
PLACES = ["cpu", pytest.param("cuda:0", marks=[pytest.mark.cuda, _CUDA])]
_rng = np.random.default_rng(0)  # the module's cases; each test then draws from its own seed


@pytest.fixture(autouse=True)
def _own_draws(node_seed: int) -> None:
    """A test's draws follow from its id, not from the tests that ran before it."""
    _rng.bit_generator.state = np.random.default_rng(node_seed).bit_generator.state


def _n(*shape: int) -> np.ndarray:
    return _rng.normal(size=shape)


def _u(*shape: int) -> np.ndarray:
    return _rng.uniform(0.05, 0.95, size=shape)


def _i(hi: int, *shape: int) -> np.ndarray:
    return _rng.integers(0, hi, size=shape).astype(np.int64)


def _probs(r: int, c: int) -> np.ndarray:
    p = _rng.random((r, c))
    return p / p.sum(1, keepdims=True)


_target = _i(5, 6)
_target[2] = -100
_keep = (_rng.random((2, 2, 4, 5)) < 0.8) / 0.8
_x4 = _n(2, 3, 7, 6)
_conv = ((1, 2), (1, 0), (1, 1))
_NONE = np.asarray(0.0)
_xl = _n(6, 5)  # a 0-d bias / keep mask means none
# method name -> argument lists (arrays are float64 / int64; the rest pass through)
CASES: dict[str, list[tuple[Any, ...]]] = {
    "relu": [(_n(3, 4),)],
    "relu_backward": [(_n(3, 4), _n(3, 4))],
    "sigmoid": [(_n(3, 4) * 5,)],
    "softplus": [(_n(3, 4) * 10,)],
    "gelu": [(_n(3, 4), "none"), (_n(3, 4), "tanh")],
    "gelu_backward": [(_n(3, 4), _n(3, 4), "none"), (_n(3, 4), _n(3, 4), "tanh")],
    "silu": [(_n(3, 4),)],
    "silu_backward": [(_n(3, 4), _n(3, 4))],
    "softmax": [(_n(3, 5), 1), (_n(2, 3, 4), 0)],
    "log_softmax": [(_n(3, 5), 1), (_n(2, 3, 4), 1)],
    "softmax_backward": [(_n(3, 5), NP.softmax(_n(3, 5), 1), 1)],
    "log_softmax_backward": [(_n(3, 5), NP.log_softmax(_n(3, 5), 1), 1)],
    "cross_entropy": [(_n(6, 5), _target, -100, 0.0), (_n(6, 5), _target, -100, 0.1)],
    "cross_entropy_backward": [
        (_n(6), _xl, _target, NP.cross_entropy(_xl, _target, -100, 0.0)[1], -100, 0.0),
        (_n(6), _xl, _target, NP.cross_entropy(_xl, _target, -100, 0.2)[1], -100, 0.2),
    ],
    "cross_entropy_soft": [(_n(4, 5), _probs(4, 5), 0.0), (_n(4, 5), _probs(4, 5), 0.1)],
    "cross_entropy_soft_backward": [(_n(4), _n(4, 5), _probs(4, 5), 0.1)],
    "nll_loss": [(NP.log_softmax(_n(6, 5), 1), _target, -100)],
    "nll_loss_backward": [(_n(6), _target, 5, -100)],
    "binary_cross_entropy": [(_u(3, 4), _u(3, 4))],
    "binary_cross_entropy_backward": [(_n(3, 4), _u(3, 4), _u(3, 4))],
    "binary_cross_entropy_with_logits": [(_n(3, 4) * 4, _u(3, 4), np.asarray(1.5))],
    "layer_norm": [
        (_n(2, 3, 4), _n(4), _n(4), 1, 1e-5),
        (_n(2, 3, 4), _n(3, 4), _n(3, 4), 2, 1e-5),
    ],
    "layer_norm_backward": [
        (_n(2, 3, 4), _n(2, 3, 4), _n(4), _n(4), 1, 1e-5),
        (_n(2, 3, 40), _n(2, 3, 40), _n(3, 40), _n(3, 40), 2, 1e-5),
    ],
    "rms_norm": [(_n(2, 3, 4), _n(4), 1, 1e-6)],
    "batch_norm": [(_x4, _n(3), _n(3), 1e-5), (_n(5, 3), _n(3), _n(3), 1e-5)],
    "batch_norm_backward": [
        (_n(2, 3, 7, 6), _x4, _n(3), _n(3), 1e-5),
        (_n(5, 3), _n(5, 3), _n(3), _n(3), 1e-5),
    ],
    "attention": [
        (
            _n(2, 2, 4, 8),
            _n(2, 2, 5, 8),
            _n(2, 2, 5, 8),
            np.asarray(0.0),
            np.asarray(0.0),
            0.3,
            False,
        ),
        (
            _n(2, 2, 5, 8),
            _n(2, 2, 5, 8),
            _n(2, 2, 5, 3),
            _n(2, 2, 5, 5),
            np.asarray(0.0),
            0.3,
            True,
        ),
        (_n(2, 2, 4, 8), _n(2, 2, 5, 8), _n(2, 2, 5, 8), _NONE, _keep, 0.5, False),
    ],
    # the backwards of the norm and attention rows: tests/unit/ops/test_fused_backward.py
    "attention_weights": [
        (_n(2, 2, 4, 8), _n(2, 2, 5, 8), _n(2, 2, 4, 5), 0.3, True),
        (_n(2, 2, 4, 8), _n(2, 2, 5, 8), np.asarray(0.0), 0.3, False),
    ],
    "conv2d": [(_x4, _n(4, 3, 3, 2), _n(4), *_conv, 1), (_x4, _n(3, 1, 2, 2), _n(3), *_conv, 3)],
    "conv2d_backward": [
        (_n(2, 4, 3, 5), _x4, _n(4, 3, 3, 2), (2, 1), (0, 0), (1, 1), 1, True, True),
        (_n(2, 3, 6, 5), _x4, _n(3, 1, 2, 2), (1, 1), (0, 0), (1, 1), 3, True, False),
        (_n(2, 4, 3, 5), _x4, _n(4, 3, 3, 2), (2, 1), (0, 0), (1, 1), 1, True, True, False),
        (_n(2, 4, 3, 5), _x4, _n(4, 3, 3, 2), (2, 1), (0, 0), (1, 1), 1, False, False, True),
    ],
    "conv_transpose2d": [(_x4, _n(3, 2, 3, 3), _n(2), (2, 2), (1, 1), (1, 0), 1, (1, 1))],
    "conv_transpose2d_backward": [
        (_n(2, 2, 14, 11), _x4, _n(3, 2, 3, 3), (2, 2), (1, 1), 1, (1, 1), True, True),
        (_n(2, 2, 14, 11), _x4, _n(3, 2, 3, 3), (2, 2), (1, 1), 1, (1, 1), False, True, False),
    ],
    "max_pool2d": [(_x4, (2, 2), (2, 2), (1, 0), (1, 1)), (_x4, (3, 2), (1, 2), (0, 1), (2, 1))],
    "max_pool2d_backward": [(_n(2, 3, 4, 3), _x4, (2, 2), (2, 2), (1, 0), (1, 1))],
    "avg_pool2d": [(_x4, (2, 3), (2, 1), (1, 1))],
    "avg_pool2d_backward": [(_n(2, 3, 4, 6), _x4.shape, (2, 3), (2, 1), (1, 1))],
    "adaptive_avg_pool2d": [(_x4, (3, 4))],
    "adaptive_avg_pool2d_backward": [(_n(2, 3, 3, 4), _x4.shape)],
    "embedding": [(_i(7, 2, 3), _n(7, 4))],
    "embedding_backward": [(_n(2, 3, 4), _i(7, 2, 3), 7)],
}


def _to_torch(a: Any, b: Any = TB) -> Any:
    return b.from_numpy(a) if isinstance(a, np.ndarray) else a


def _compare(name: str, got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), name
        for g, w in zip(got, want):
            _compare(name, g, w)
        return
    if want is None:
        assert got is None, name
        return
    got_np = TB.to_numpy(got)
    want = np.asarray(want)
    assert got_np.shape == want.shape, (name, got_np.shape, want.shape)
    assert got_np.dtype == want.dtype, (name, got_np.dtype, want.dtype)
    np.testing.assert_allclose(got_np, want, rtol=1e-9, atol=1e-11, err_msg=name)


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_numpy(name: str, where: str) -> None:
    b = em.Device.torch(where).b
    np_fn: Callable[..., Any] = getattr(NP, name)
    t_fn: Callable[..., Any] = getattr(b, name)
    for args in CASES[name]:
        want = np_fn(*args)
        got = t_fn(*[_to_torch(a, b) for a in args])
        _compare(name, got, want)


def test_every_nn_kernel_has_a_case() -> None:
    start = [n for n in dir(NP) if not n.startswith("_")]
    # a fused backward NumPy leaves to the row's rule is the base's "none" default
    absent = set(vars(FusedBackwards)) - set(NP.fused_backwards)
    # an optional kernel NumPy does not override raises (attention's fused dropout: CUDA only)
    absent |= {n for n, f in vars(OptionalKernels).items() if getattr(type(NP), n, None) is f}
    # attention's fused backwards take different inputs by design (torch's recalls its fused
    # forward and declines a bias or mask; NumPy's rebuilds the weights, float32 / float64):
    # each is held to the row's rule in tests/unit/ops/test_fused_backward.py
    absent.add("attention_backward")
    nn_names = {n for n in start if n in CASES or n.endswith("_backward")} - absent
    assert nn_names <= set(CASES), sorted(nn_names - set(CASES))


def test_stats_are_reused_and_recomputed() -> None:
    x = TB.from_numpy(_n(2, 3, 4))
    w, b = TB.from_numpy(_n(4)), TB.from_numpy(_n(4))
    g = TB.from_numpy(_n(2, 3, 4))
    TB.layer_norm(x, w, b, 1, 1e-5)
    reused = TB.layer_norm_backward(g, x, w, b, 1, 1e-5)
    fresh = TB.layer_norm_backward(g, x.clone(), w, b, 1, 1e-5)  # no remembered stats
    for a, c in zip(reused, fresh):
        torch.testing.assert_close(a, c)


@pytest.mark.parametrize(
    ("dtype", "is_cuda", "want"),
    [
        (torch.float64, True, ""),  # neither fused kernel takes float64: exact math path
        (torch.float32, True, "efficient"),
        (torch.bfloat16, True, "flash"),
        (torch.float16, True, "flash"),
        (torch.float32, False, "flash_cpu"),
        (torch.float64, False, "flash_cpu"),
        (torch.bfloat16, False, "flash_cpu"),
        (torch.int64, False, ""),
    ],
)
def test_fused_attention_kernel_by_dtype(dtype: Any, is_cuda: bool, want: str) -> None:
    from ember.backend.torch.kernels.attention import fused_attention_kernel

    assert fused_attention_kernel(dtype, is_cuda) == want


def test_float64_attention_takes_the_math_path_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    from ember.backend.torch.kernels import attention

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g, dtype=torch.float64) for _ in range(3))
    none = torch.tensor(0.0, dtype=torch.float64)
    # CPU tensors posing as CUDA ones: only the math path may run (a fused call would raise)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a fused attention kernel got float64 inputs")

    monkeypatch.setattr(attention, "_CPU_FLASH", ())  # only the CUDA kernels are in play
    monkeypatch.setattr(attention, "_fused_forward", refuse)
    monkeypatch.setattr(attention, "_fused_backward", refuse)
    out = attention.attention(q, k, v, none, none, 0.5, True)
    g = torch.ones_like(out)
    assert attention.attention_backward(g, q, k, v, none, none, 0.5, True) is NotImplemented
    attrs = {"scale": 0.5, "is_causal": True}
    grads = rule_grads(TB, "attention", (q, k, v, none, none), attrs, g)  # the math path
    monkeypatch.undo()
    want = NP.attention(q.numpy(), k.numpy(), v.numpy(), _NONE, _NONE, 0.5, True)
    # two float64 paths (torch's math ops, NumPy's kernel): a few ulps apart, not bit-equal
    np.testing.assert_allclose(out.numpy(), want, **attention_tolerance(torch.float64, 4, 8))
    assert len(grads) == 5 and grads[0].dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_flash_attention_matches_the_math_path(dtype: Any) -> None:
    from ember.backend.torch.kernels import attention

    g = torch.Generator().manual_seed(0)
    q, k, v, grad = (torch.randn(2, 3, 5, 4, generator=g, dtype=dtype) for _ in range(4))
    none = torch.tensor(0.0, dtype=dtype)
    assert attention._fused_kind(q, k, v, none, none, True) == "flash_cpu"
    out = attention.attention(q, k, v, none, none, 0.5, True)
    grads = attention.attention_backward(grad, q, k, v, none, none, 0.5, True)
    want = NP.attention(q.numpy(), k.numpy(), v.numpy(), _NONE, _NONE, 0.5, True)
    raw = (q.numpy(), k.numpy(), v.numpy(), none.numpy(), none.numpy())
    want_grads = rule_grads(NP, "attention", raw, {"scale": 0.5, "is_causal": True}, grad.numpy())
    np.testing.assert_allclose(out.numpy(), want, **attention_tolerance(dtype, 5, 4))
    tol = attention_tolerance(dtype, 5, 4, backward=True)
    for got, exp in zip(grads[:3], want_grads[:3]):
        np.testing.assert_allclose(got.numpy(), exp, **tol)


def test_attention_placeholder_gradients_are_one_cached_zero() -> None:
    gen = torch.Generator().manual_seed(2)
    q, k, v, g = (torch.randn(1, 2, 4, 8, generator=gen) for _ in range(4))
    none = torch.tensor(0.0)
    first = TB.attention_backward(g, q, k, v, none, none, 0.5, True)
    again = TB.attention_backward(g, q, k, v, none, none, 0.5, False)
    assert first[3] is again[3] is first[4]  # no fill per backward for the 0-d placeholders
    assert first[3].shape == () and first[3].item() == 0.0


def test_fused_attention_backward_reuses_the_forward_for_strided_inputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ember.backend.torch.kernels import attention

    # q and k with a strided last dim: the fused kernels run on contiguous copies of them
    gen = torch.Generator().manual_seed(3)
    q, k = (torch.randn(1, 2, 8, 4, generator=gen).transpose(-1, -2) for _ in range(2))
    v, g = (torch.randn(1, 2, 4, 8, generator=gen) for _ in range(2))
    assert q.stride(-1) != 1
    none = torch.tensor(0.0)
    assert attention._fused_kind(q, k, v, none, none, True) == "flash_cpu"
    out = attention.attention(q, k, v, none, none, 0.5, True)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the backward ran the fused forward again")

    monkeypatch.setattr(attention, "_fused_forward", refuse)
    grads = attention.attention_backward(g, q, k, v, none, none, 0.5, True)
    monkeypatch.undo()
    want = NP.attention(q.numpy(), k.numpy(), v.numpy(), _NONE, _NONE, 0.5, True)
    # float32 along two paths (torch's flash kernel, NumPy's): 4 keys of size 8
    np.testing.assert_allclose(out.numpy(), want, **attention_tolerance(torch.float32, 4, 8))
    raw = (q.numpy(), k.numpy(), v.numpy(), none.numpy(), none.numpy())
    want_grads = rule_grads(NP, "attention", raw, {"scale": 0.5, "is_causal": True}, g.numpy())
    tol = attention_tolerance(torch.float32, 4, 8, backward=True)
    for got, exp in zip(grads[:3], want_grads[:3]):
        np.testing.assert_allclose(got.numpy(), exp, **tol)


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cross_entropy_kernels_read_half_logits(where: str, low: str, eps: float) -> None:
    b = em.Device.torch(where).b
    half = np.dtype(ml_dtypes.bfloat16) if low == "bfloat16" else np.dtype(np.float16)
    x = (_n(9, 70) * 3).astype(half)
    target = _i(70, 9)
    target[3] = -100
    xt, tt = b.from_numpy(x), b.from_numpy(target)
    out_np, lse_np = NP.cross_entropy(x, target, -100, eps)
    out_t, lse_t = b.cross_entropy(xt, tt, -100, eps)
    # float32 results, computed in float32 from the half logits as they are
    want, want_lse = NP.cross_entropy(x.astype(np.float32), target, -100, eps)
    assert out_np.dtype == np.float32 and out_t.dtype == torch.float32
    assert lse_np.dtype == np.float32 and lse_t.dtype == torch.float32
    for got_np, got_t, exp in ((out_np, out_t, want), (lse_np, lse_t, want_lse)):
        np.testing.assert_allclose(got_np, exp, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(b.to_numpy(got_t), exp, rtol=1e-6, atol=1e-6)
    grad = _rng.normal(size=(9,)).astype(np.float32)
    g32 = NP.cross_entropy_backward(grad, x.astype(np.float32), target, want_lse, -100, eps)
    g_np = NP.cross_entropy_backward(grad, x, target, lse_np, -100, eps)
    g_t = b.cross_entropy_backward(b.from_numpy(grad), xt, tt, lse_t, -100, eps)
    # the gradient comes back in the logits' dtype: one rounding (NumPy), or a few (torch's
    # softmax and in-place updates in the low-precision buffer)
    assert g_np.dtype == half and g_t.dtype == b.from_numpy(x).dtype
    np.testing.assert_array_equal(g_np, g32.astype(half))
    # error bound: a few units in the last place of each term of g_soft softmax - g_loss t
    x32 = x.astype(np.float32)
    soft = np.exp(x32 - x32.max(1, keepdims=True))
    soft /= soft.sum(1, keepdims=True)
    g_loss = np.abs(np.where(target != -100, grad, 0))[:, None]
    scale = g_loss
    terms = soft * scale + g_loss * eps / 70
    terms[np.arange(9), np.where(target != -100, target, 0)] += g_loss[:, 0]
    tol = 2.0**-7 if low == "bfloat16" else 2.0**-9
    # below the normal range a rounding errs by up to a subnormal spacing, not by a relative
    # amount: once on a softmax value (times the gradient's scale), once on the result
    floor = float(ml_dtypes.finfo(half).smallest_subnormal) * (1 + scale)
    err = np.abs(b.to_numpy(g_t).astype(np.float32) - g32)
    assert (err <= tol * (np.abs(g32) + terms) + floor).all(), err.max()
