"""``F.linear_cross_entropy``: the chunked projection + cross-entropy row against ``linear`` +
``cross_entropy`` (values and gradients), its memory, ``GPT.loss``, and bad input."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember.models.gpt import GPT, GPTConfig

# float64: the two computations differ only in summation order (a few ulps of the loss scale)
TOL = {"float64": (1e-12, 1e-13), "float32": (2e-5, 2e-6)}
CASES = [
    # (rows shape, K, V, bias, label_smoothing, chunk, ignore some rows)
    ((6,), 5, 7, True, 0.0, 3, False),
    ((2, 3), 5, 7, False, 0.1, 2, True),
    ((4,), 8, 33, True, 0.0, None, True),
    ((5,), 3, 4, True, 0.2, 1, False),
    ((3, 4), 6, 16, True, 0.0, 16, True),
]


def _grads(
    device: em.Device,
    fused: bool,
    arrays: tuple[np.ndarray, ...],
    bias: bool,
    eps: float,
    chunk: int | None,
    reduction: str = "mean",
) -> list[np.ndarray]:
    dev = device.autodiff()
    xa, wa, ba, ta = arrays
    x = em.Tensor.from_data(xa, device=dev).require_grad()
    w = em.Tensor.from_data(wa, device=dev).require_grad()
    b = em.Tensor.from_data(ba, device=dev).require_grad() if bias else None
    t = em.Tensor.from_data(ta, device=dev)
    if fused:
        loss = F.linear_cross_entropy(
            x, w, t, b, label_smoothing=eps, chunk=chunk, reduction=reduction
        )
    else:
        v = wa.shape[0]
        logits = F.linear(x, w, b).reshape((-1, v))
        loss = F.cross_entropy(logits, t.reshape((-1,)), label_smoothing=eps, reduction=reduction)
        if reduction == "none":
            loss = loss.reshape(ta.shape)
    out = loss.to_numpy()
    seed = loss * 1.0 if reduction != "none" else (loss * 0.5).sum()
    g = seed.backward()
    params = [x, w] + ([b] if b is not None else [])
    return [out] + [p.grad(g).to_numpy() for p in params]  # type: ignore[union-attr]


def _arrays(
    rng: np.random.Generator, rows: tuple[int, ...], k: int, v: int, dt: Any, ignore: bool
) -> tuple[np.ndarray, ...]:
    x = rng.normal(size=(*rows, k)).astype(dt)
    w = (rng.normal(size=(v, k)) / np.sqrt(k)).astype(dt)
    b = rng.normal(size=(v,)).astype(dt)
    t = rng.integers(0, v, size=rows)
    if ignore:
        t.reshape(-1)[::3] = -100
    return x, w, b, t


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}->{c[2]}")
def test_matches_linear_then_cross_entropy(device: em.Device, dtype: str, case: Any) -> None:
    rows, k, v, bias, eps, chunk, ignore = case
    rng = np.random.default_rng(len(rows) * 100 + v)
    arrays = _arrays(rng, rows, k, v, np.dtype(dtype), ignore)
    got = _grads(device, True, arrays, bias, eps, chunk)
    want = _grads(device, False, arrays, bias, eps, chunk)
    rtol, atol = TOL[dtype]
    for name, a, b in zip(("loss", "x", "weight", "bias"), got, want):
        assert a.dtype == b.dtype, name
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_reductions(device: em.Device, reduction: str) -> None:
    rng = np.random.default_rng(9)
    arrays = _arrays(rng, (2, 5), 4, 9, np.float64, True)
    got = _grads(device, True, arrays, True, 0.05, 4, reduction)
    want = _grads(device, False, arrays, True, 0.05, 4, reduction)
    assert got[0].shape == want[0].shape
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_chunks_give_the_same_values(device: em.Device) -> None:
    rng = np.random.default_rng(4)
    arrays = _arrays(rng, (7,), 6, 20, np.float64, True)
    ref = _grads(device, True, arrays, True, 0.1, 20)
    for chunk in (1, 3, 7, 19, 64):
        for a, b in zip(_grads(device, True, arrays, True, 0.1, chunk), ref):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_bfloat16_under_autocast(device: em.Device) -> None:
    """Under autocast both paths project in bfloat16 and reduce in float32: the loss is float32
    and close; gradients come back in the parameters' dtype."""
    rng = np.random.default_rng(6)
    xa, wa, _, ta = _arrays(rng, (16,), 32, 50, np.float32, False)
    out = []
    for fused in (True, False):
        dev = device.autodiff()
        x = em.Tensor.from_data(xa, device=dev).require_grad()
        w = em.Tensor.from_data(wa, device=dev).require_grad()
        t = em.Tensor.from_data(ta, device=dev)
        with em.amp.autocast(em.bfloat16):
            if fused:
                loss = F.linear_cross_entropy(x, w, t, chunk=16)
            else:
                loss = F.cross_entropy(F.linear(x, w), t)
        assert loss.dtype is em.float32
        g = loss.backward()
        gw = w.grad(g)
        assert gw is not None and gw.dtype is em.float32
        out.append((loss.item(), gw.to_numpy()))
    assert abs(out[0][0] - out[1][0]) < 2e-2 * abs(out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=5e-2, atol=5e-3)


def test_never_holds_the_logits() -> None:
    """tracemalloc on NumPy: forward + backward of 256 rows x 8192 classes in chunks of 512
    peaks far below one (rows, vocab) float32 array (8 MiB); linear + cross_entropy holds two."""
    rng = np.random.default_rng(0)
    n, k, v = 256, 32, 8192
    xa = rng.normal(size=(n, k)).astype(np.float32)
    wa = (rng.normal(size=(v, k)) * 0.1).astype(np.float32)
    ta = rng.integers(0, v, size=n)
    dev = em.Device.cpu().autodiff()
    peaks = []
    for fused in (True, False):
        x = em.Tensor.from_data(xa, device=dev).require_grad()
        w = em.Tensor.from_data(wa, device=dev).require_grad()
        t = em.Tensor.from_data(ta, device=dev)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            if fused:
                loss = F.linear_cross_entropy(x, w, t, chunk=512)
            else:
                loss = F.cross_entropy(F.linear(x, w), t)
            g = loss.backward()
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert w.grad(g) is not None
        peaks.append(peak)
    logits = n * v * 4
    grad_w = v * k * 4  # the weight's gradient is an output either way
    assert peaks[0] < grad_w + 0.5 * logits, peaks
    assert peaks[1] > 2 * logits, peaks


def test_gpt_loss_equals_cross_entropy_of_its_logits(device: em.Device) -> None:
    em.seed(0)
    cfg = GPTConfig(vocab_size=23, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.0)
    dev = device.autodiff()
    model = GPT(cfg, device=dev)
    rng = np.random.default_rng(1)
    plain = dev.without_autodiff()
    idx = em.Tensor.from_data(rng.integers(0, 23, size=(2, 8)), device=plain)
    tgt = em.Tensor.from_data(rng.integers(0, 23, size=(2, 8)), device=plain)
    fused = model.loss(idx, tgt)
    ref = F.cross_entropy(model(idx).reshape((-1, 23)), tgt.reshape((-1,)))
    np.testing.assert_allclose(fused.item(), ref.item(), rtol=2e-6)
    gf, gr = fused.backward(), ref.backward()
    for p in model.parameters():
        a, b = p.val().grad(gf), p.val().grad(gr)
        assert a is not None and b is not None
        np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-4, atol=1e-6)


def test_bad_input(device: em.Device) -> None:
    x = em.Tensor.zeros((4, 3), device=device)
    w = em.Tensor.zeros((5, 3), device=device)
    t = em.tensor([0, 1, 2, 4]).to_device(device)
    with pytest.raises(
        em.ShapeError, match=r"linear_cross_entropy: expected weight of shape \(V, 3\)"
    ):
        F.linear_cross_entropy(x, em.Tensor.zeros((5, 4), device=device), t)
    with pytest.raises(em.ShapeError, match="expected target of shape"):
        F.linear_cross_entropy(x, w, em.tensor([0, 1]).to_device(device))
    with pytest.raises(em.DTypeError, match="int class indices"):
        F.linear_cross_entropy(x, w, t.float())
    with pytest.raises(em.DTypeError, match="weight of the input's dtype"):
        F.linear_cross_entropy(x, w.cast(em.float64), t)
    with pytest.raises(em.ShapeError, match="out of range"):
        F.linear_cross_entropy(x, w, em.tensor([0, 1, 2, 5]).to_device(device))
    with pytest.raises(em.ShapeError, match="bias of shape"):
        F.linear_cross_entropy(x, w, t, em.Tensor.zeros((4,), device=device))
    with pytest.raises(em.ShapeError, match="chunk"):
        F.linear_cross_entropy(x, w, t, chunk=0)
    with pytest.raises(em.ShapeError, match="label_smoothing"):
        F.linear_cross_entropy(x, w, t, label_smoothing=1.5)
    with pytest.raises(em.ShapeError, match="reduction"):
        F.linear_cross_entropy(x, w, t, reduction="avg")
