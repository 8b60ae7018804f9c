"""``em.nn.functional`` against ``torch.nn.functional``: values and gradients through the public
API (argument normalisation, unbatched inputs, reductions, masks), in float64 and float32."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember as em
from ember.nn import functional as F

from .compare import AD, check, dev


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


# ---------------------------------------------------------------- activations
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (0, 3), ()])
@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"])
def test_activations(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> None:
    x = rng.normal(size=shape) * 3
    if name == "gelu_tanh":
        check(lambda t: F.gelu(t, approximate="tanh"), lambda t: TF.gelu(t, approximate="tanh"), x)
    else:
        check(getattr(F, name), getattr(TF, name) if name != "sigmoid" else torch.sigmoid, x)


def test_activations_float32_and_extremes() -> None:
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0])
    for name in ("sigmoid", "silu", "gelu", "relu"):
        ref = torch.sigmoid if name == "sigmoid" else getattr(TF, name)
        check(getattr(F, name), ref, x, dtype="float32", rtol=1e-6, atol=1e-6)


def test_activations_on_non_contiguous_input(rng: np.random.Generator) -> None:
    x = rng.normal(size=(4, 6))
    check(lambda t: F.gelu(t.transpose()), lambda t: TF.gelu(t.T), x)
    check(lambda t: F.softmax(t.transpose(), dim=-1), lambda t: torch.softmax(t.T, -1), x)


def test_activation_rejects_int_input() -> None:
    with pytest.raises(em.DTypeError, match="relu: expected input to be a float"):
        F.relu(em.tensor([1, 2]))


# ---------------------------------------------------------------- softmax family
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize(
    ("shape", "dim"), [((4, 7), 1), ((4, 7), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((5,), 0)]
)
def test_softmax(fn: str, shape: tuple[int, ...], dim: int, rng: np.random.Generator) -> None:
    x = rng.normal(size=shape) * 5
    check(lambda t: getattr(F, fn)(t, dim), lambda t: getattr(torch, fn)(t, dim), x)


def test_softmax_is_stable_for_huge_scores() -> None:
    x = np.array([[1e4, 0.0, -1e4], [-1e30, -1e30, 0.0]])
    check(lambda t: F.softmax(t, 1), lambda t: torch.softmax(t, 1), x, dtype="float32")
    check(
        lambda t: F.log_softmax(t, 1),
        lambda t: torch.log_softmax(t, 1),
        x,
        dtype="float32",
        rtol=1e-6,
    )


def test_softmax_large_rows_use_the_blocked_kernel(rng: np.random.Generator) -> None:
    # big enough for the threaded, row-blocked path
    x = rng.normal(size=(300, 500)) * 4
    check(
        lambda t: F.softmax(t, 1),
        lambda t: torch.softmax(t, 1),
        x,
        dtype="float32",
        rtol=1e-5,
        atol=1e-7,
    )
    check(
        lambda t: F.log_softmax(t, -1),
        lambda t: torch.log_softmax(t, -1),
        x,
        dtype="float32",
        rtol=1e-5,
        atol=1e-5,
    )


def test_softmax_bad_dim() -> None:
    with pytest.raises(em.ShapeError, match="softmax: dim 2 is out of range"):
        F.softmax(em.Tensor.zeros((2, 3)), dim=2)


# ---------------------------------------------------------------- dropout
def test_dropout_mask_scale_and_gradient() -> None:
    em.seed(3)
    x = em.Tensor.ones((200, 50), device=AD).require_grad()
    y = F.dropout(x, p=0.3, training=True)
    vals = np.unique(y.to_numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.7], rtol=1e-6)
    kept = (y.to_numpy() != 0).mean()
    assert 0.65 < kept < 0.75
    g = x.grad(y.sum().backward())
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), y.to_numpy())


def test_dropout_identity_cases_and_seeding() -> None:
    x = em.Tensor.ones((4, 4))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).to_numpy(), np.zeros((4, 4)))
    em.seed(5)
    a = F.dropout(x, 0.5).to_numpy()
    em.seed(5)
    np.testing.assert_array_equal(F.dropout(x, 0.5).to_numpy(), a)
    with pytest.raises(em.ShapeError, match="dropout: expected a probability"):
        F.dropout(x, 1.5)


def test_dropout_balanced_matches_disabled_exactly() -> None:
    # the mask is a kept creation, so recomputation under Balanced is exact
    results = []
    for device in (AD, AD.gradient_checkpointing()):
        em.seed(11)
        x = em.Tensor.random((8, 16), em.Distribution.normal(), device=device).require_grad()
        y = F.gelu(F.dropout(x.tanh() * 2.0, p=0.4)).sum()
        g = x.grad(y.backward())
        assert g is not None
        results.append(g.to_numpy())
    np.testing.assert_array_equal(results[0], results[1])


# ---------------------------------------------------------------- linear and embedding
def test_linear(rng: np.random.Generator) -> None:
    x, w, b = rng.normal(size=(5, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4,))
    check(F.linear, TF.linear, x, w, b)
    check(lambda x, w: F.linear(x, w), lambda x, w: TF.linear(x, w), rng.normal(size=(2, 5, 3)), w)
    with pytest.raises(em.ShapeError, match="linear: expected weight"):
        F.linear(em.Tensor.zeros((5, 3)), em.Tensor.zeros((3, 4)))


def test_embedding(rng: np.random.Generator) -> None:
    idx = np.array([[0, 2, 2], [4, 0, 1]])
    check(F.embedding, TF.embedding, idx, rng.normal(size=(5, 3)))
    with pytest.raises(em.ShapeError, match=r"embedding: index 5 is out of range.*\[0, 5\)"):
        F.embedding(em.tensor([1, 5]), em.Tensor.zeros((5, 3)))
    with pytest.raises(em.ShapeError, match="embedding: index -1"):
        F.embedding(em.tensor([-1]), em.Tensor.zeros((5, 3)))
    with pytest.raises(em.DTypeError, match="embedding: expected int indices"):
        F.embedding(em.tensor([1.0]), em.Tensor.zeros((5, 3)))


# ---------------------------------------------------------------- convolution
CONV_CASES = [
    ((2, 3, 8, 7), (4, 3, 3, 3), {}),
    ((1, 4, 9, 9), (6, 2, 3, 2), {"stride": 2, "padding": 1, "groups": 2}),
    ((2, 2, 10, 8), (3, 2, 3, 3), {"stride": (2, 1), "padding": (2, 0), "dilation": (2, 1)}),
    ((2, 3, 5, 5), (2, 3, 5, 5), {}),  # kernel as large as the input
    ((1, 1, 6, 6), (2, 1, 1, 1), {"stride": 3}),
    ((2, 3, 6, 6), (4, 3, 3, 3), {"padding": "same"}),
    ((2, 3, 6, 6), (4, 3, 3, 3), {"padding": "valid"}),
    ((3, 6, 6), (4, 3, 3, 3), {}),  # unbatched
]


@pytest.mark.parametrize(("xs", "ws", "kw"), CONV_CASES)
def test_conv2d(xs: Any, ws: Any, kw: dict[str, Any], rng: np.random.Generator) -> None:
    x, w, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=(ws[0],))
    check(
        lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: TF.conv2d(x, w, b, **kw), x, w, b
    )
    check(lambda x, w: F.conv2d(x, w, **kw), lambda x, w: TF.conv2d(x, w, **kw), x, w)


def test_conv2d_float32(rng: np.random.Generator) -> None:
    x, w = rng.normal(size=(4, 3, 12, 12)), rng.normal(size=(5, 3, 3, 3))
    check(
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda x, w: TF.conv2d(x, w, padding=1),
        x,
        w,
        dtype="float32",
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.parametrize(
    ("xs", "ws", "kw"),
    [
        ((2, 3, 9), (4, 3, 3), {}),
        ((1, 4, 12), (4, 2, 2), {"stride": 2, "padding": 1, "groups": 2}),
        ((3, 10), (2, 3, 3), {"dilation": 2}),
        ((2, 3, 9), (4, 3, 5), {"padding": "same", "dilation": 2}),
    ],
)
def test_conv1d(xs: Any, ws: Any, kw: dict[str, Any], rng: np.random.Generator) -> None:
    x, w, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=(ws[0],))
    check(
        lambda x, w, b: F.conv1d(x, w, b, **kw), lambda x, w, b: TF.conv1d(x, w, b, **kw), x, w, b
    )


@pytest.mark.parametrize(
    ("xs", "ws", "kw"),
    [
        ((2, 3, 4, 5), (3, 2, 3, 3), {}),
        ((1, 4, 3, 3), (4, 3, 3, 2), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}),
        ((1, 2, 3, 4), (2, 2, 2, 2), {"dilation": 2, "stride": (1, 2)}),
        ((2, 4, 4), (2, 3, 2, 2), {"stride": 2}),
    ],
)
def test_conv_transpose2d(xs: Any, ws: Any, kw: dict[str, Any], rng: np.random.Generator) -> None:
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    b = rng.normal(size=(ws[1] * kw.get("groups", 1),))
    check(
        lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
        lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw),
        x,
        w,
        b,
    )


def test_conv_errors() -> None:
    x = em.Tensor.zeros((2, 3, 8, 8))
    with pytest.raises(em.ShapeError, match=r"conv2d: expected a 3 or 4-D input"):
        F.conv2d(em.Tensor.zeros((8, 8)), em.Tensor.zeros((4, 3, 3, 3)))
    with pytest.raises(em.ShapeError, match="conv2d: expected a 4-D weight"):
        F.conv2d(x, em.Tensor.zeros((4, 3, 3)))
    with pytest.raises(em.ShapeError, match="larger than the padded input"):
        F.conv2d(x, em.Tensor.zeros((4, 3, 9, 3)))
    with pytest.raises(em.ShapeError, match="channels don't fit groups=1"):
        F.conv2d(x, em.Tensor.zeros((4, 2, 3, 3)))
    with pytest.raises(em.ShapeError, match="expected stride >= 1"):
        F.conv2d(x, em.Tensor.zeros((4, 3, 3, 3)), stride=0)
    with pytest.raises(em.ShapeError, match="expected bias of shape"):
        F.conv2d(x, em.Tensor.zeros((4, 3, 3, 3)), em.Tensor.zeros((3,)))
    with pytest.raises(em.DTypeError, match="weight of the input's dtype"):
        F.conv2d(x, em.Tensor.zeros((4, 3, 3, 3), dtype=em.float64))
    with pytest.raises(em.ShapeError, match="padding='same' needs stride 1"):
        F.conv2d(x, em.Tensor.zeros((4, 3, 3, 3)), stride=2, padding="same")
    with pytest.raises(em.ShapeError, match=r"conv1d: expected a 2 or 3-D input"):
        F.conv1d(x, em.Tensor.zeros((4, 3, 3)))
    x1 = em.Tensor.zeros((2, 3, 8))
    with pytest.raises(em.ShapeError, match="conv1d: expected a 3-D weight"):
        F.conv1d(x1, em.Tensor.zeros((4, 3, 3, 3)))
    with pytest.raises(em.ShapeError, match="conv1d: channels don't fit groups=2"):
        F.conv1d(x1, em.Tensor.zeros((4, 3, 3)), groups=2)
    with pytest.raises(em.ShapeError, match=r"conv1d: expected bias of shape \(4,\)"):
        F.conv1d(x1, em.Tensor.zeros((4, 3, 3)), em.Tensor.zeros((3,)))
    with pytest.raises(em.ShapeError, match="conv1d: padding='same' needs stride 1"):
        F.conv1d(x1, em.Tensor.zeros((4, 3, 3)), stride=2, padding="same")
    with pytest.raises(em.ShapeError, match="conv_transpose2d: expected a 4-D weight"):
        F.conv_transpose2d(x, em.Tensor.zeros((3, 2, 3)))
    with pytest.raises(em.ShapeError, match="output_padding"):
        F.conv_transpose2d(x, em.Tensor.zeros((3, 2, 3, 3)), output_padding=1)


# ---------------------------------------------------------------- pooling
POOL_CASES = [
    ((2, 3, 8, 8), {"kernel_size": 2}),
    ((1, 2, 7, 9), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((2, 1, 6, 5), {"kernel_size": (2, 3), "stride": (1, 2)}),
    ((3, 5, 5), {"kernel_size": 5}),  # unbatched, kernel as large as the input
]


@pytest.mark.parametrize(("xs", "kw"), POOL_CASES)
@pytest.mark.parametrize("fn", ["max_pool2d", "avg_pool2d"])
def test_pool(fn: str, xs: Any, kw: dict[str, Any], rng: np.random.Generator) -> None:
    x = rng.normal(size=xs)
    check(lambda t: getattr(F, fn)(t, **kw), lambda t: getattr(TF, fn)(t, **kw), x)


def test_max_pool_dilation_and_ties() -> None:
    x = np.arange(2 * 1 * 7 * 7, dtype=float).reshape(2, 1, 7, 7) % 5  # many ties
    check(
        lambda t: F.max_pool2d(t, 2, 1, 0, 2),
        lambda t: TF.max_pool2d(t, 2, 1, 0, 2),
        np.random.default_rng(0).normal(size=(2, 1, 7, 7)),
    )
    check(lambda t: F.max_pool2d(t, 3, 2), lambda t: TF.max_pool2d(t, 3, 2), x)


@pytest.mark.parametrize(
    ("xs", "out"),
    [
        ((2, 3, 8, 8), 4),
        ((1, 2, 7, 5), (3, 2)),
        ((2, 2, 5, 7), (None, 3)),
        ((1, 1, 3, 3), 5),
        ((2, 4, 4), 1),
    ],
)
def test_adaptive_avg_pool2d(xs: Any, out: Any, rng: np.random.Generator) -> None:
    check(
        lambda t: F.adaptive_avg_pool2d(t, out),
        lambda t: TF.adaptive_avg_pool2d(t, out),
        rng.normal(size=xs),
    )


def test_pool_errors() -> None:
    with pytest.raises(em.ShapeError, match=r"max_pool2d: expected a 3 or 4-D input"):
        F.max_pool2d(em.Tensor.zeros((4, 4)), 2)
    with pytest.raises(em.ShapeError, match=r"avg_pool2d: expected an input of at least one"):
        F.avg_pool2d(em.Tensor.zeros((1, 1, 3, 3)), 4)
    with pytest.raises(em.ShapeError, match="at most half the kernel"):
        F.max_pool2d(em.Tensor.zeros((1, 1, 6, 6)), 2, padding=2)
    with pytest.raises(em.ShapeError, match="expected kernel_size >= 1"):
        F.max_pool2d(em.Tensor.zeros((1, 1, 6, 6)), 0)
    with pytest.raises(em.ShapeError, match="adaptive_avg_pool2d: expected output_size >= 1"):
        F.adaptive_avg_pool2d(em.Tensor.zeros((1, 1, 6, 6)), 0)


# ---------------------------------------------------------------- normalisation
@pytest.mark.parametrize(("xs", "ns"), [((4, 6), 6), ((2, 3, 4), (3, 4)), ((2, 3, 4), [4])])
def test_layer_norm(xs: Any, ns: Any, rng: np.random.Generator) -> None:
    shape = (ns,) if isinstance(ns, int) else tuple(ns)
    x, w, b = rng.normal(size=xs) * 3 + 1, rng.normal(size=shape), rng.normal(size=shape)
    check(
        lambda x, w, b: F.layer_norm(x, ns, w, b),
        lambda x, w, b: TF.layer_norm(x, shape, w, b),
        x,
        w,
        b,
    )
    check(lambda x: F.layer_norm(x, ns, eps=1e-2), lambda x: TF.layer_norm(x, shape, eps=1e-2), x)
    with pytest.raises(em.ShapeError, match="layer_norm: expected the input's trailing dims"):
        F.layer_norm(em.Tensor.zeros(xs), 7)


def test_rms_norm(rng: np.random.Generator) -> None:
    x, w = rng.normal(size=(3, 4, 5)), rng.normal(size=(5,))
    check(lambda x, w: F.rms_norm(x, 5, w), lambda x, w: TF.rms_norm(x, (5,), w), x, w)
    check(lambda x: F.rms_norm(x, (4, 5), eps=1e-3), lambda x: TF.rms_norm(x, (4, 5), eps=1e-3), x)
    check(
        lambda x: F.rms_norm(x, 5),
        lambda x: TF.rms_norm(x, (5,)),
        x,
        dtype="float32",
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("xs", [(6, 3), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_training(xs: Any, rng: np.random.Generator) -> None:
    c = xs[1]
    x, w, b = rng.normal(size=xs) * 2 + 1, rng.normal(size=(c,)), rng.normal(size=(c,))
    rm, rv = rng.normal(size=(c,)), rng.uniform(0.5, 2, size=(c,))
    check(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)[0],
        lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True),
        x,
        w,
        b,
    )
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    want = TF.batch_norm(torch.tensor(x), trm, trv, training=True, momentum=0.2)
    out, nrm, nrv = F.batch_norm(
        em.tensor(x, dtype=em.float64),
        em.tensor(rm, dtype=em.float64),
        em.tensor(rv, dtype=em.float64),
        training=True,
        momentum=0.2,
    )
    np.testing.assert_allclose(out.to_numpy(), want.numpy(), rtol=1e-10)
    assert nrm is not None and nrv is not None
    np.testing.assert_allclose(nrm.to_numpy(), trm.numpy(), rtol=1e-10)  # torch updated in place
    np.testing.assert_allclose(nrv.to_numpy(), trv.numpy(), rtol=1e-10)


def test_batch_norm_eval(rng: np.random.Generator) -> None:
    x, w, b = rng.normal(size=(4, 3, 5)), rng.normal(size=(3,)), rng.normal(size=(3,))
    rm, rv = rng.normal(size=(3,)), rng.uniform(0.5, 2, size=(3,))
    check(
        lambda x, w, b: F.batch_norm(
            x,
            em.tensor(rm, device=dev(), dtype=em.float64),
            em.tensor(rv, device=dev(), dtype=em.float64),
            w,
            b,
        )[0],
        lambda x, w, b: TF.batch_norm(x, torch.tensor(rm), torch.tensor(rv), w, b),
        x,
        w,
        b,
    )
    rmt = em.tensor(rm)
    _, same_rm, _ = F.batch_norm(em.tensor(x), rmt, em.tensor(rv))
    assert same_rm is rmt
    with pytest.raises(em.ShapeError, match="expected running_mean and running_var"):
        F.batch_norm(em.tensor(x), None, None)
    with pytest.raises(em.ShapeError, match="more than 1 value per channel"):
        F.batch_norm(em.Tensor.zeros((1, 3)), None, None, training=True)


# ---------------------------------------------------------------- attention
def _sdpa_ref(**kw: Any) -> Callable[..., torch.Tensor]:
    return lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **kw)


@pytest.mark.parametrize(
    ("qs", "ks", "vs"),
    [
        ((2, 5, 4), (2, 6, 4), (2, 6, 3)),
        ((2, 3, 4, 8), (2, 3, 4, 8), (2, 3, 4, 8)),
        ((3, 4), (5, 4), (5, 2)),
    ],
)
def test_sdpa(qs: Any, ks: Any, vs: Any, rng: np.random.Generator) -> None:
    q, k, v = rng.normal(size=qs), rng.normal(size=ks), rng.normal(size=vs)
    check(F.scaled_dot_product_attention, _sdpa_ref(), q, k, v)
    check(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        _sdpa_ref(is_causal=True),
        q,
        k,
        v,
    )
    check(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
        _sdpa_ref(scale=0.3),
        q,
        k,
        v,
    )


def test_sdpa_masks(rng: np.random.Generator) -> None:
    q, k, v = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))
    bmask = rng.random(size=(4, 5)) > 0.3
    bmask[:, 0] = True  # every query sees at least one key
    fmask = rng.normal(size=(2, 4, 5))
    check(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, em.tensor(bmask, device=dev())),
        _sdpa_ref(attn_mask=torch.tensor(bmask)),
        q,
        k,
        v,
    )
    check(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
        lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, m),
        q,
        k,
        v,
        fmask,
    )


def test_sdpa_dropout_uses_a_kept_mask(rng: np.random.Generator) -> None:
    q, k, v = (em.tensor(rng.normal(size=(2, 4, 3)), device=AD).require_grad() for _ in range(3))
    em.seed(2)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    em.seed(2)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert not np.allclose(a.to_numpy(), F.scaled_dot_product_attention(q, k, v).to_numpy())
    grads = a.sum().backward()
    assert q.grad(grads) is not None


def test_sdpa_errors() -> None:
    q = em.Tensor.zeros((2, 4, 3))
    with pytest.raises(em.ShapeError, match="embedding sizes of q and k"):
        F.scaled_dot_product_attention(q, em.Tensor.zeros((2, 4, 2)), em.Tensor.zeros((2, 4, 3)))
    with pytest.raises(em.ShapeError, match="not both"):
        F.scaled_dot_product_attention(q, q, q, em.Tensor.zeros((4, 4)), is_causal=True)
    with pytest.raises(em.ShapeError, match="do not broadcast"):
        F.scaled_dot_product_attention(q, q, q, em.Tensor.zeros((3, 4)))
    with pytest.raises(em.DTypeError, match="bool or float attn_mask"):
        F.scaled_dot_product_attention(q, q, q, em.tensor(np.zeros((4, 4), dtype=np.int64)))


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_and_pool_large_inputs_use_the_threaded_kernels(
    stride: int, rng: np.random.Generator
) -> None:
    if dev().backend_name != "numpy":
        # this checks the NumPy kernels' threaded paths; elsewhere a conv output that differs in
        # the last float32 bits can flip a near-tied max-pool window and reroute its gradient
        pytest.skip("exercises the NumPy backend's threaded kernels")
    # big enough that im2col, col2im and pooling split the batch between threads
    x, w, b = rng.normal(size=(8, 3, 34, 30)), rng.normal(size=(4, 3, 5, 5)), rng.normal(size=(4,))
    check(
        lambda x, w, b: F.max_pool2d(F.conv2d(x, w, b, stride=stride, padding=1), 2),
        lambda x, w, b: TF.max_pool2d(TF.conv2d(x, w, b, stride=stride, padding=1), 2),
        x,
        w,
        b,
        dtype="float32",
        rtol=1e-4,
        atol=1e-4,
    )
    check(
        lambda x: F.max_pool2d(x, 3, 1, 1),
        lambda x: TF.max_pool2d(x, 3, 1, 1),
        rng.normal(size=(8, 4, 40, 40)),
        dtype="float32",
        rtol=1e-6,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    ("fn", "shape"),
    [
        (lambda x: F.softmax(x, 1), (3, 0)),
        (lambda x: F.log_softmax(x, 1), (3, 0)),
        (lambda x: F.softmax(x, 1), (0, 3)),
        (lambda x: F.conv2d(x, em.Tensor.zeros((4, 3, 3, 3), dtype=em.float64)), (0, 3, 8, 8)),
        (lambda x: F.max_pool2d(x, 2), (0, 3, 8, 8)),
        (lambda x: F.layer_norm(x, 4), (0, 4)),
        (lambda x: F.gelu(x), (0,)),
    ],
)
def test_size_zero_dims(fn: Callable[[em.Tensor], em.Tensor], shape: tuple[int, ...]) -> None:
    x = em.Tensor.zeros(shape, device=AD, dtype=em.float64).require_grad()
    y = fn(x)
    assert y.numel() == 0
    g = x.grad(y.sum().backward())
    assert g is not None and g.shape == shape


def test_max_pool_after_relu_ties_go_to_the_first_maximum(rng: np.random.Generator) -> None:
    # relu zeroes whole windows: the gradient must reach only their first element, as in torch
    x = rng.normal(size=(4, 3, 8, 8)) - 0.5
    check(lambda t: F.max_pool2d(F.relu(t), 2), lambda t: TF.max_pool2d(TF.relu(t), 2), x)
    check(
        lambda t: F.max_pool2d(F.relu(t), 3, 1, 1), lambda t: TF.max_pool2d(TF.relu(t), 3, 1, 1), x
    )


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16])
def test_half_precision_keeps_its_dtype(dtype: em.DType) -> None:
    # Python-float arithmetic and matrix products widen bfloat16 NumPy arrays: kernels cast back
    x = em.Tensor.random((1, 2, 4, 6), em.Distribution.normal(), device=AD, dtype=dtype)
    x = x.require_grad()
    q = x.reshape((2, 4, 6))
    outs = [
        F.gelu(x),
        F.gelu(x, approximate="tanh"),
        F.silu(x),
        F.softmax(x, -1),
        F.layer_norm(x, 6),
        F.adaptive_avg_pool2d(x, 3),
        F.max_pool2d(x, 2),
        F.conv2d(x, em.Tensor.ones((3, 2, 2, 2), dtype=dtype)),
        F.scaled_dot_product_attention(q, q, q, is_causal=True),
        F.cross_entropy(x.reshape((8, 6)), em.tensor([0, 1, 2, 3, 4, 5, 0, 1])),
    ]
    for out in outs:
        assert out.dtype is dtype
        g = x.grad(out.sum().backward())
        assert g is not None and g.dtype is dtype


def test_conv_pool_and_norm_on_non_contiguous_inputs(rng: np.random.Generator) -> None:
    x, w = rng.normal(size=(2, 7, 6, 3)), rng.normal(size=(4, 3, 3, 3))
    # (N, H, W, C) -> (N, C, W, H): a permuted view, not a contiguous array
    check(
        lambda x, w: F.conv2d(x.permute((0, 3, 2, 1)), w, padding=1),
        lambda x, w: TF.conv2d(x.permute(0, 3, 2, 1), w, padding=1),
        x,
        w,
    )
    check(
        lambda x: F.max_pool2d(x.permute((0, 3, 2, 1)), 2),
        lambda x: TF.max_pool2d(x.permute(0, 3, 2, 1), 2),
        x,
    )
    check(
        lambda x: F.layer_norm(x.swap_dims(1, 3), 7),
        lambda x: TF.layer_norm(x.transpose(1, 3), (7,)),
        x,
    )
    check(
        lambda x: F.cross_entropy(
            x.reshape((14, 18)).transpose(), em.tensor(np.arange(18) % 14, device=dev())
        ),
        lambda x: TF.cross_entropy(x.reshape(14, 18).T, torch.tensor(np.arange(18) % 14)),
        x,
    )
