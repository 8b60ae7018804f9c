"""The torch attention kernels pick the CUDA kernel PyTorch's dispatcher picks, cuDNN included."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
attention = pytest.importorskip("ember.backend.torch.kernels.attention")
SDPBackend = pytest.importorskip("torch.nn.attention").SDPBackend

_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
B, H, T, D = 2, 4, 128, 64

# torch 2.4's cuDNN attention schemas (torch/include/ATen/ops/*_ops.h of the 2.4.0 wheel)
_CUDNN_FORWARD_2_4 = (
    "aten::_scaled_dot_product_cudnn_attention(Tensor query, Tensor key, Tensor value, "
    "float dropout_p=0.0, bool is_causal=False, bool return_debug_mask=False, *, "
    "float? scale=None) -> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, "
    "Tensor cum_seq_k, SymInt max_q, SymInt max_k, Tensor philox_seed, Tensor philox_offset, "
    "Tensor debug_attn_mask)"
)
_CUDNN_BACKWARD_2_4 = (
    "aten::_scaled_dot_product_cudnn_attention_backward(Tensor grad_out, Tensor query, "
    "Tensor key, Tensor value, Tensor out, Tensor logsumexp, Tensor cum_seq_q, "
    "Tensor cum_seq_k, SymInt max_q, SymInt max_k, float dropout_p, bool is_causal, "
    "Tensor philox_seed, Tensor philox_offset, *, float? scale=None) -> (Tensor, Tensor, Tensor)"
)


def _heads(x: Any, num_heads: int) -> Any:
    """(B, T, C) -> (B, H, T, C // H), a view as the GPT model makes it."""
    b, t, c = x.shape
    return x.view(b, t, num_heads, c // num_heads).transpose(1, 2)


def _qkv(dtype: Any, device: str = "cpu", seq: int = 8, dim: int = 16) -> tuple[Any, Any, Any]:
    g = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(2, seq, 3 * 2 * dim, generator=g, device=device, dtype=dtype)
    q, k, v = (_heads(t, 2) for t in qkv.split(2 * dim, 2))
    return q, k, v


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[..., int]], list[Any]]:
    """CPU tensors posing as CUDA ones, an empty choice cache, and a stand-in dispatcher choice."""
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))
    monkeypatch.setattr(attention, "_CHOICES", {})

    def install(choose: Callable[..., int]) -> list[Any]:
        calls: list[Any] = []

        def fused_sdp_choice(q: Any, k: Any, v: Any, mask: Any, p: float, causal: bool) -> int:
            calls.append((q, k, v, mask, p, causal))
            return choose(q, k, v)

        monkeypatch.setattr(torch, "_fused_sdp_choice", fused_sdp_choice)
        return calls

    return install


@pytest.mark.parametrize(
    ("backend", "want"),
    [
        (SDPBackend.CUDNN_ATTENTION, "cudnn"),
        (SDPBackend.FLASH_ATTENTION, "flash"),
        (SDPBackend.EFFICIENT_ATTENTION, "efficient"),
        (SDPBackend.MATH, ""),
    ],
)
def test_kind_follows_the_dispatcher_and_is_cached(
    fake_cuda: Callable[[Callable[..., int]], list[Any]], backend: Any, want: str
) -> None:
    calls = fake_cuda(lambda q, k, v: backend.value)
    q, k, v = _qkv(torch.bfloat16)
    none = torch.tensor(0.0, dtype=torch.bfloat16)
    assert attention._fused_kind(q, k, v, none, none, True) == want
    assert attention._fused_kind(q, k, v, none, none, True) == want
    assert len(calls) == 1  # asked once per dtype, shape, layout, causality and device
    cq, _, _, mask, p, causal = calls[0]
    # asked as in training (inputs that require grad) with what the kernel sees
    assert cq.requires_grad and mask is None and p == 0.0 and causal is True
    assert cq.shape == q.shape and cq.stride() == q.stride()
    attention._fused_kind(q, k, v, none, none, False)
    attention._fused_kind(q.contiguous(), k, v, none, none, True)
    assert len(calls) == 3  # another causality or another layout asks again


def test_kind_falls_back_per_dtype_without_the_dispatcher(
    fake_cuda: Callable[[Callable[..., int]], list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(q: Any, k: Any, v: Any) -> int:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found.")

    fake_cuda(refuse)
    none = torch.tensor(0.0)
    assert attention._fused_kind(*_qkv(torch.bfloat16), none, none, True) == "flash"
    assert attention._fused_kind(*_qkv(torch.float32), none, none, True) == "efficient"
    monkeypatch.setattr(attention, "_CHOICES", {})
    monkeypatch.delattr(torch, "_fused_sdp_choice")
    assert attention._fused_kind(*_qkv(torch.float16), none, none, False) == "flash"


def test_cudnn_choice_runs_the_fallback_when_the_schema_differs(
    fake_cuda: Callable[[Callable[..., int]], list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cuda(lambda q, k, v: SDPBackend.CUDNN_ATTENTION.value)
    monkeypatch.setattr(attention, "_CUDNN_CALLABLE", False)
    none = torch.tensor(0.0)
    assert attention._fused_kind(*_qkv(torch.bfloat16), none, none, True) == "flash"


def test_head_sizes_the_raw_ops_reject_take_the_math_path(
    fake_cuda: Callable[[Callable[..., int]], list[Any]],
) -> None:
    calls = fake_cuda(lambda q, k, v: SDPBackend.CUDNN_ATTENTION.value)
    none = torch.tensor(0.0)
    assert attention._fused_kind(*_qkv(torch.bfloat16, dim=12), none, none, True) == ""
    assert not calls


class _RecordingAten:
    """Stands in for ``torch.ops.aten``: records each call and returns cuDNN-shaped results."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def op(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            if name == "_scaled_dot_product_cudnn_attention":
                q = args[0]
                b, h, t, d = q.shape
                # like cuDNN (torch 2.6 on): the output takes q's (B, T, H, D) memory order
                out = torch.zeros(b, t, h, d, dtype=q.dtype).transpose(1, 2)
                lse = torch.zeros(b, h, t, 1)
                seed, offset = torch.tensor(1), torch.tensor(2)
                return out, lse, None, None, t, t, seed, offset, None
            if name == "_scaled_dot_product_cudnn_attention_backward":
                return tuple(torch.zeros_like(x) for x in args[1:4])
            raise AssertionError(f"attention called aten.{name} instead of the cuDNN ops")

        return op


@pytest.mark.parametrize("grad_layout", ["as_output", "contiguous"])
def test_cudnn_kind_calls_the_cudnn_ops(
    fake_cuda: Callable[[Callable[..., int]], list[Any]],
    monkeypatch: pytest.MonkeyPatch,
    grad_layout: str,
) -> None:
    fake_cuda(lambda q, k, v: SDPBackend.CUDNN_ATTENTION.value)
    fake_aten = _RecordingAten()
    monkeypatch.setattr(attention, "aten", fake_aten)
    q, k, v = _qkv(torch.bfloat16)
    none = torch.tensor(0.0, dtype=torch.bfloat16)
    out = attention.attention(q, k, v, none, none, 0.25, True)
    (name, args, kwargs), *_ = fake_aten.calls
    assert name == "_scaled_dot_product_cudnn_attention"
    # the caller's strided views go in as they are, as F.scaled_dot_product_attention passes them
    assert args[0] is q and args[1] is k and args[2] is v
    assert args[3:] == (None, True, 0.0, True, False) and kwargs == {"scale": 0.25}

    g = torch.Generator().manual_seed(1)
    grad = torch.randn(out.shape, generator=g, dtype=out.dtype)
    if grad_layout == "as_output":
        b, h, t, d = out.shape
        grad = torch.randn(b, t, h, d, generator=g).transpose(1, 2).to(out.dtype)
    grads = attention.attention_backward(grad, q, k, v, none, none, 0.25, True)
    assert len(fake_aten.calls) == 2  # the backward reused the forward's results
    name, args, kwargs = fake_aten.calls[1]
    assert name == "_scaled_dot_product_cudnn_attention_backward"
    fwd_out = args[4]
    assert fwd_out is out and args[1] is q and args[2] is k and args[3] is v
    # the incoming gradient reaches cuDNN in the output's strides, copied only when they differ
    assert args[0].stride() == fwd_out.stride()
    assert (args[0] is grad) == (grad_layout == "as_output")
    torch.testing.assert_close(args[0], grad, rtol=0, atol=0)
    lse, seed, offset = args[5], args[6], args[7]
    assert lse.shape == (2, 2, 8, 1) and seed.item() == 1 and offset.item() == 2
    assert args[8:] == (None, None, None, 8, 8, 0.0, True) and kwargs == {"scale": 0.25}
    assert [g.shape for g in grads[:3]] == [q.shape, k.shape, v.shape]


def test_the_installed_cudnn_schemas_are_the_ones_called() -> None:
    fwd = torch.ops.aten._scaled_dot_product_cudnn_attention.default._schema
    bwd = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default._schema
    assert attention._schema_matches(fwd, attention._CUDNN_FORWARD_ARGS, 9)
    assert attention._schema_matches(bwd, attention._CUDNN_BACKWARD_ARGS, 3)
    assert attention._cudnn_schemas_match() and attention._CUDNN_CALLABLE


def test_torch_2_4_cudnn_schemas_are_refused() -> None:
    fwd = torch._C.parse_schema(_CUDNN_FORWARD_2_4)
    bwd = torch._C.parse_schema(_CUDNN_BACKWARD_2_4)
    assert not attention._schema_matches(fwd, attention._CUDNN_FORWARD_ARGS, 9)
    assert not attention._schema_matches(bwd, attention._CUDNN_BACKWARD_ARGS, 3)


def test_cpu_attention_never_asks_the_dispatcher(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("the CPU path asked torch._fused_sdp_choice")

    monkeypatch.setattr(torch, "_fused_sdp_choice", refuse)
    none = torch.tensor(0.0)
    assert attention._fused_kind(*_qkv(torch.float32), none, none, True) == "flash_cpu"


def _cuda_case(causal: bool, grad_layout: str) -> tuple[Any, ...]:
    g = torch.Generator(device="cuda").manual_seed(0)
    qkv = torch.randn(B, T, 3 * H * D, generator=g, device="cuda", dtype=torch.bfloat16)
    q, k, v = (_heads(t, H) for t in qkv.split(H * D, 2))
    grad = torch.randn(B, T, H * D, generator=g, device="cuda", dtype=torch.bfloat16)
    grad = _heads(grad, H)  # the layout the model's (B, T, C) projection hands back
    if grad_layout == "contiguous":
        grad = grad.contiguous()
    return q, k, v, grad


@pytest.mark.cuda
@_CUDA
@pytest.mark.parametrize("grad_layout", ["as_model", "contiguous"])
@pytest.mark.parametrize("causal", [True, False])
def test_cuda_bf16_attention_matches_torch_sdpa(causal: bool, grad_layout: str) -> None:
    q, k, v, grad = _cuda_case(causal, grad_layout)
    none = torch.tensor(0.0, device="cuda", dtype=torch.bfloat16)
    scale = D**-0.5
    out = attention.attention(q, k, v, none, none, scale, causal)
    grads = attention.attention_backward(grad, q, k, v, none, none, scale, causal)
    # reference: PyTorch's exact math path in float32 on the same (rounded) values; its fused
    # kernels are not the reference (the layout of the incoming gradient is what is tested)
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        want = torch.nn.functional.scaled_dot_product_attention(
            qr, kr, vr, is_causal=causal, scale=scale
        )
        want.backward(grad.float())
    # bfloat16 keeps 8 significant bits: a few roundings apart on values of order one
    tol = {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(out.float(), want.detach(), **tol)
    for got, exp in zip(grads[:3], (qr.grad, kr.grad, vr.grad)):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), exp, **tol)


def _kernel_names(run: Callable[[], Any]) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's own start-up notes
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.cuda
@_CUDA
@pytest.mark.parametrize("causal", [True, False])
def test_cuda_runs_cudnn_kernels_where_torch_picks_cudnn(causal: bool) -> None:
    q, k, v, grad = _cuda_case(causal, "as_model")
    with torch.enable_grad():
        picked = torch._fused_sdp_choice(
            *(t.detach().requires_grad_() for t in (q, k, v)), None, 0.0, causal
        )
    if picked != SDPBackend.CUDNN_ATTENTION.value:
        pytest.skip(f"torch picks backend {picked} here, not cuDNN")
    none = torch.tensor(0.0, device="cuda", dtype=torch.bfloat16)
    assert attention._fused_kind(q, k, v, none, none, causal) == "cudnn"
    scale = D**-0.5
    forward = _kernel_names(lambda: attention.attention(q, k, v, none, none, scale, causal))
    backward = _kernel_names(
        lambda: attention.attention_backward(grad, q, k, v, none, none, scale, causal)
    )
    assert any("cudnn" in n.lower() for n in forward), forward
    assert any("cudnn" in n.lower() for n in backward), backward
    assert not any("flash_fwd" in n or "fmha" in n for n in forward), forward
