"""CUDA-only checks of the torch backend: transfers, fused kernels, and a sync-free training step.

Every test here skips cleanly on a machine without CUDA.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember import amp

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _cuda() -> em.Device:
    return em.Device.cuda(0)


def test_devices_and_a_clear_error_for_a_missing_index() -> None:
    assert em.Device.cuda() == em.Device.torch("cuda") == em.Device.torch("cuda:0")
    assert str(_cuda()) == "torch:cuda:0"
    n = torch.cuda.device_count()
    with pytest.raises(em.DeviceError, match=f"below {n}"):
        em.Device.cuda(n)


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16, em.float32, em.float64, em.int64])
def test_round_trip_and_seeded_sampling(dtype: em.DType) -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = em.Tensor.from_data(a, device=_cuda(), dtype=dtype)
    assert t.dtype is dtype
    np.testing.assert_array_equal(t.to_numpy(), em.Tensor.from_data(a, dtype=dtype).to_numpy())
    em.seed(3)
    x = em.Tensor.random((64,), em.Distribution.normal(0, 1), device=_cuda()).to_numpy()
    em.seed(3)
    y = em.Tensor.random((64,), em.Distribution.normal(0, 1), device=_cuda()).to_numpy()
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("src", ["numpy", "torch:cpu"])
def test_moves_to_and_from_cuda_carry_gradients_back(src: str) -> None:
    home = em.Device.cpu() if src == "numpy" else em.Device.torch("cpu")
    x = em.Tensor.from_data([[1.0, 2.0], [3.0, -1.0]], device=home.autodiff()).require_grad()
    y = x.to_device(_cuda())
    assert y.device == _cuda() and y.is_tracked()
    z = (y * y).to_device(home)  # back again, still tracked
    g = x.grad(z.sum().backward())
    assert g is not None and g.device == home
    np.testing.assert_allclose(g.to_numpy(), 2 * np.array([[1.0, 2.0], [3.0, -1.0]]))


def _attention_case(dtype: Any, causal: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.normal(size=(2, 4, 64, 32)) for _ in range(4))
    dev = _cuda().autodiff()
    ts = [em.Tensor.from_data(a, device=dev, dtype=dtype).require_grad() for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ts, is_causal=causal)
    grads = (out * em.Tensor.from_data(g, device=_cuda(), dtype=dtype)).sum().backward()
    ref_ts = [
        em.Tensor.from_data(a, device=em.Device.cpu().autodiff(), dtype="float64")
        for a in (q, k, v)
    ]
    ref_ts = [t.require_grad() for t in ref_ts]
    ref = F.scaled_dot_product_attention(*ref_ts, is_causal=causal)
    rgrads = (ref * em.Tensor.from_data(g, dtype="float64")).sum().backward()
    return {
        "out": (out.cast(em.float64).to_numpy(), ref.to_numpy()),
        "grads": [
            (t.grad(grads).cast(em.float64).to_numpy(), r.grad(rgrads).to_numpy())
            for t, r in zip(ts, ref_ts)
        ],
    }


@pytest.mark.parametrize(
    ("dtype", "tol"), [(em.float32, 2e-3), (em.bfloat16, 6e-2), (em.float16, 1e-2)]
)
@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_forward_and_backward(dtype: em.DType, tol: float, causal: bool) -> None:
    case = _attention_case(dtype, causal)
    got, want = case["out"]
    np.testing.assert_allclose(got, want, atol=tol, rtol=tol)
    for got, want in case["grads"]:
        np.testing.assert_allclose(got, want, atol=3 * tol, rtol=3 * tol)


def test_fused_attention_backward_without_remembered_statistics() -> None:
    b = _cuda().b
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = (2, 2, 16, 32)
    q, k, v, g = (
        torch.randn(shape, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(4)
    )
    none = torch.zeros((), device="cuda", dtype=torch.bfloat16)
    b.attention(q, k, v, none, none, 0.2, True)
    reused = b.attention_backward(g, q, k, v, none, none, 0.2, True)
    fresh = b.attention_backward(g, q.clone(), k, v, none, none, 0.2, True)
    for a, c in zip(reused[:3], fresh[:3]):
        torch.testing.assert_close(a, c)


def test_cudnn_convolution_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    x, w, bias = rng.normal(size=(2, 3, 9, 8)), rng.normal(size=(4, 3, 3, 3)), rng.normal(size=4)
    outs = []
    for dev in (_cuda(), em.Device.cpu()):
        ad = dev.autodiff()
        ts = [
            em.Tensor.from_data(a, device=ad, dtype="float64").require_grad() for a in (x, w, bias)
        ]
        y = F.conv2d(ts[0], ts[1], ts[2], stride=2, padding=1)
        grads = (y * y).sum().backward()
        outs.append([y.to_numpy()] + [t.grad(grads).to_numpy() for t in ts])
    for got, want in zip(*outs):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


class _GPT(em.nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.wte = em.nn.Embedding(256, 64, device=device)
        self.wpe = em.nn.Embedding(32, 64, device=device)
        self.ln1 = em.nn.LayerNorm(64, device=device)
        self.qkv = em.nn.Linear(64, 192, device=device)
        self.proj = em.nn.Linear(64, 64, device=device)
        self.ln2 = em.nn.LayerNorm(64, device=device)
        self.fc = em.nn.Linear(64, 256, device=device)
        self.fc_proj = em.nn.Linear(256, 64, device=device)
        self.head = em.nn.Linear(64, 256, bias=False, device=device)

    def forward(self, idx: em.Tensor) -> em.Tensor:
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(em.Tensor.arange(0, T, device=idx.device.without_autodiff()))
        q, k, v = self.qkv(self.ln1(x)).split(64, 2)
        # (B, T, C) -> (B, H, T, C // H) with 4 heads
        q, k, v = (t.reshape((B, T, 4, 16)).swap_dims(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.swap_dims(1, 2).reshape((B, T, 64)))
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.head(x)


def _sync_debug(mode: str) -> None:
    with warnings.catch_warnings():
        # torch warns that the mode is a prototype; the suite turns warnings into errors
        warnings.simplefilter("ignore", UserWarning)
        torch.cuda.set_sync_debug_mode(mode)


def _step(model: _GPT, optim: Any, idx: em.Tensor, tgt: em.Tensor, low: Any) -> Any:
    with amp.autocast(low or em.bfloat16, enabled=low is not None):
        logits = model(idx)
        loss = F.cross_entropy(logits.reshape((-1, 256)), tgt.reshape((-1,)))
    grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
    return optim.step(1e-3, model, grads), loss


@pytest.mark.parametrize("low", [None, em.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("balanced", [False, True], ids=["disabled", "balanced"])
def test_full_training_step_has_no_host_sync(low: Any, balanced: bool) -> None:
    em.seed(0)
    dev = _cuda().autodiff()
    if balanced:
        dev = dev.gradient_checkpointing()
    model = _GPT(dev)
    optim = em.optim.AdamW(grad_clipping=em.optim.GradientClipping.norm(1.0))
    idx = em.Tensor.random((4, 32), em.Distribution.uniform(0, 256), device=_cuda()).int()
    tgt = em.Tensor.random((4, 32), em.Distribution.uniform(0, 256), device=_cuda()).int()
    model, first = _step(model, optim, idx, tgt, low)  # warm-up: allocator, cuBLAS handles
    torch.cuda.synchronize()
    _sync_debug("error")
    try:
        for _ in range(3):
            model, loss = _step(model, optim, idx, tgt, low)
    finally:
        _sync_debug("default")
    assert loss.item() < first.item()


def test_fp16_training_with_loss_scaling() -> None:
    em.seed(0)
    dev = _cuda().autodiff()
    model = _GPT(dev)
    optim = em.optim.AdamW()
    scaler = amp.GradScaler()
    idx = em.Tensor.random((4, 32), em.Distribution.uniform(0, 256), device=_cuda()).int()
    losses = []
    for _ in range(5):
        with amp.autocast(em.float16):
            loss = F.cross_entropy(model(idx).reshape((-1, 256)), idx.reshape((-1,)))
        grads = em.optim.GradientsParams.from_grads(scaler.scale(loss).backward(), model)
        model = scaler.step(optim, 1e-3, model, grads)
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    for p in model.parameters():
        assert p.val().dtype is em.float32  # parameters stay float32


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_bias_gradient_needs_no_staging_buffer(dtype: Any) -> None:
    """The leading-dims sum of a bias gradient: the float32 sum's value, and no buffer beyond
    the (N,) result (CUDA's reduction staged one 4x the input)."""
    from ember.backend.torch.backend import TorchBackend

    b = TorchBackend("cuda:0")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((16, 1024, 1024), device="cuda", generator=g).to(dtype)
    b.sum_to_shape(x, (1024,))  # the first product on a stream allocates cuBLAS's workspace
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = b.sum_to_shape(x, (1024,))
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    assert extra < 2**20, f"{extra / 2**20:.1f} MiB allocated beyond the input"
    assert out.shape == (1024,) and out.dtype == dtype
    want = x.float().sum((0, 1))
    # one rounding of the float32 total to the half type, plus split-K partial sums
    tol = 2 * torch.finfo(dtype).eps * want.abs().max().item() + 0.05
    torch.testing.assert_close(out.float(), want, rtol=0, atol=tol)
    tail = b.sum_to_shape(x, (1024, 1024))  # more than one trailing dim, the same way
    torch.testing.assert_close(tail.float(), x.float().sum(0), rtol=0, atol=tol)
    empty = torch.zeros((4, 3, 0), dtype=dtype, device="cuda")
    assert b.sum_to_shape(empty, (0,)).shape == (0,)  # no product of a zero-size bias


def test_the_embedding_gradient_is_reproducible() -> None:
    """Repeated rows sum in one order on every call (index_add_'s atomics did not: 1-ulp
    differences run to run), and match a float64 sum."""
    from ember.backend.torch.kernels.embedding import embedding_backward

    g = torch.Generator(device="cuda").manual_seed(0)
    idx = torch.randint(0, 17, (4, 48), device="cuda", generator=g)  # many repeats per row
    grad = torch.randn((4, 48, 32), device="cuda", generator=g)
    ref = embedding_backward(grad, idx, 17)
    for _ in range(10):
        assert torch.equal(embedding_backward(grad, idx, 17), ref)
    want = torch.zeros((17, 32), dtype=torch.float64, device="cuda")
    want.index_add_(0, idx.reshape(-1), grad.reshape(-1, 32).double())
    torch.testing.assert_close(ref.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dim", [0, 1])
def test_an_index_select_gradient_is_reproducible(dim: int) -> None:
    """select_add (index_select's gradient) sums repeated indices in one order on every call."""
    from ember.backend.torch.backend import TorchBackend

    b = TorchBackend("cuda:0")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.zeros((17, 33) if dim == 0 else (33, 17), device="cuda")
    idx = torch.randint(0, 17, (200,), device="cuda", generator=g)
    v = torch.randn((200, 33) if dim == 0 else (33, 200), device="cuda", generator=g)
    ref = b.select_add(x, idx, v, dim)
    for _ in range(10):
        assert torch.equal(b.select_add(x, idx, v, dim), ref)
    want = torch.zeros(x.shape, dtype=torch.float64, device="cuda")
    want.index_add_(dim, idx, v.double())
    torch.testing.assert_close(ref.double(), want, rtol=1e-5, atol=1e-5)


def test_a_gather_gradient_is_reproducible() -> None:
    """scatter_add (gather's gradient) sums repeated targets in one order on every call."""
    from ember.backend.torch.backend import TorchBackend

    b = TorchBackend("cuda:0")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.zeros((6, 17), device="cuda")
    idx = torch.randint(0, 17, (6, 300), device="cuda", generator=g)
    v = torch.randn((6, 300), device="cuda", generator=g)
    ref = b.scatter_add(x, idx, v, 1)
    for _ in range(10):
        assert torch.equal(b.scatter_add(x, idx, v, 1), ref)
    want = torch.zeros(x.shape, dtype=torch.float64, device="cuda")
    want.scatter_add_(1, idx, v.double())
    torch.testing.assert_close(ref.double(), want, rtol=1e-5, atol=1e-5)
