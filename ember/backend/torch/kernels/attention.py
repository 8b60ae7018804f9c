"""Torch kernels of scaled dot-product attention: fused (cuDNN / flash / memory-efficient) or math.

On CUDA the fused kernel is the one PyTorch's own dispatcher picks for the same inputs
(``torch._fused_sdp_choice``), asked once per dtype, shape, layout, causality and device. The
fused kernels' backwards are the attention row's ``fused_backward`` override; inputs that take
the math path decline it (``NotImplemented``), and the row's generic rule differentiates them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.nn.attention import SDPBackend

from ....errors import DeviceError
from ...families.fused import Declined
from .stats import Tensor, _recall, _remember, aten

_HALF = (torch.float16, torch.bfloat16)
_CPU_FLASH = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# the cuDNN op schemas this file calls (torch 2.5 on); torch 2.4's differ, and there a cuDNN
# choice runs the per-dtype fallback kernel instead
_CUDNN_FORWARD_ARGS = (
    "query",
    "key",
    "value",
    "attn_bias",
    "compute_log_sumexp",
    "dropout_p",
    "is_causal",
    "return_debug_mask",
    "scale",
)
_CUDNN_BACKWARD_ARGS = (
    "grad_out",
    "query",
    "key",
    "value",
    "out",
    "logsumexp",
    "philox_seed",
    "philox_offset",
    "attn_bias",
    "cum_seq_q",
    "cum_seq_k",
    "max_q",
    "max_k",
    "dropout_p",
    "is_causal",
    "scale",
)


def _schema_matches(schema: torch.FunctionSchema, names: tuple[str, ...], returns: int) -> bool:
    return tuple(a.name for a in schema.arguments) == names and len(schema.returns) == returns


def _cudnn_schemas_match() -> bool:
    """True when this torch's cuDNN attention ops take the arguments ``_fused_forward`` passes."""
    try:
        forward = aten._scaled_dot_product_cudnn_attention.default._schema
        backward = aten._scaled_dot_product_cudnn_attention_backward.default._schema
    except (AttributeError, RuntimeError):
        return False
    return _schema_matches(forward, _CUDNN_FORWARD_ARGS, 9) and _schema_matches(
        backward, _CUDNN_BACKWARD_ARGS, 3
    )


_CUDNN_CALLABLE = _cudnn_schemas_match()

_ZERO_SCALARS: dict[tuple[torch.device, torch.dtype], Tensor] = {}


def _zero_scalar(like: Tensor) -> Tensor:
    """A 0-d zero of ``like``'s device and dtype, made once (no fill kernel per backward).

    Only handed out as the gradient of a 0-d placeholder; nothing writes into it.
    """
    key = (like.device, like.dtype)
    z = _ZERO_SCALARS.get(key)
    if z is None:
        z = _ZERO_SCALARS[key] = torch.zeros((), dtype=like.dtype, device=like.device)
    return z


def fused_attention_kernel(dtype: torch.dtype, is_cuda: bool) -> str:
    """The fused attention kernel that takes ``dtype`` on this device kind, or "" for none.

    On CUDA, flash attention runs float16 and bfloat16 and the memory-efficient kernel float32;
    every other dtype (float64 above all: no fused kernel takes it) takes the exact math path
    (``attention_weights``; its backward is the row's generic rule). For the CUDA dtypes named
    here, the attention kernels then run whichever of cuDNN, flash and memory-efficient attention
    PyTorch's dispatcher picks for the inputs; this per-dtype answer is the fallback when the
    dispatcher cannot be asked. On the CPU, ATen's flash kernel ("flash_cpu") takes all four float
    dtypes.

    Example:
        >>> fused_attention_kernel(torch.float64, is_cuda=True)
        ''
        >>> fused_attention_kernel(torch.bfloat16, is_cuda=True)
        'flash'
    """
    if not is_cuda:
        return "flash_cpu" if dtype in _CPU_FLASH else ""
    if dtype in _HALF:
        return "flash"
    if dtype == torch.float32:
        return "efficient"
    return ""


# kernel per (dtype, device, causal, shapes, strides); torch.backends.cuda.enable_*_sdp switches
# flipped later reach only inputs not asked about yet
_CHOICES: dict[tuple[Any, ...], str] = {}


def _fused_kind(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, keep: Tensor, causal: bool) -> str:
    """The fused kernel exact for this attention: "cudnn", "flash", "efficient", "flash_cpu", ""."""
    if bias.ndim or keep.ndim:
        return ""
    return _fused_kind_of(q, k, v, causal)


def _fused_kind_of(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> str:
    """``_fused_kind`` with no bias or kept mask."""
    kind = fused_attention_kernel(q.dtype, q.is_cuda)
    if not kind or q.ndim != 4:
        return ""
    if k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2]:
        return ""  # the fused ops take one (B, H) for all three: broadcast batch dims run exactly
    if not (q.dtype == k.dtype == v.dtype) or q.shape[-1] != v.shape[-1]:
        return ""
    if causal and q.shape[-2] != k.shape[-2]:
        return ""  # keep ember's top-left causal alignment on the exact path
    if kind == "flash_cpu":
        return kind
    d = q.shape[-1]
    if d % 8 or d > 256:
        return ""  # PyTorch pads such head sizes before its fused calls; ember calls the ops raw
    key = (q.dtype, q.device, causal, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride())
    chosen = _CHOICES.get(key)
    if chosen is None:
        chosen = _CHOICES[key] = _dispatcher_choice(q, k, v, causal, kind)
    return chosen


def _dispatcher_choice(q: Tensor, k: Tensor, v: Tensor, causal: bool, fallback: str) -> str:
    """The CUDA kernel PyTorch's dispatcher picks for these inputs, else ``fallback``.

    Asked with inputs that require grad, as in training, so the pick's backward runs too.
    """
    try:
        with torch.enable_grad():
            qg, kg, vg = (_last_contiguous(t).detach().requires_grad_() for t in (q, k, v))
            backend = torch._fused_sdp_choice(qg, kg, vg, None, 0.0, causal)
    except (AttributeError, RuntimeError, TypeError):
        backend = None
    if backend == SDPBackend.CUDNN_ATTENTION.value:
        return "cudnn" if _CUDNN_CALLABLE else fallback
    if backend == SDPBackend.FLASH_ATTENTION.value:
        return "flash"
    if backend == SDPBackend.EFFICIENT_ATTENTION.value:
        return "efficient"
    if backend == SDPBackend.MATH.value:
        return ""
    return fallback


def _last_contiguous(x: Tensor) -> Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def _fused_forward(
    kind: str, q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool, p: float = 0.0
) -> Any:
    """The fused kernel's outputs; ``p`` > 0 (CUDA kernels only) drops attention weights with a
    mask drawn from the current default CUDA generator (see ``_drawing_from``)."""
    if kind == "flash_cpu":
        return torch._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    if kind == "cudnn":
        return aten._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, p, causal, False, scale=scale
        )
    if kind == "flash":
        return aten._scaled_dot_product_flash_attention(q, k, v, p, causal, False, scale=scale)
    return aten._scaled_dot_product_efficient_attention(q, k, v, None, True, p, causal, scale=scale)


# ---------------------------------------------------------------- dropout inside the kernel
_CUDA_KINDS = ("cudnn", "flash", "efficient")
# torch 2.5 on: a generator can share another's state, as CUDA graphs need
_GRAPHSAFE = hasattr(torch.Generator, "graphsafe_set_state")


def draws_dropout(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> bool:
    """Whether ``attention_dropout`` runs these inputs (a CUDA fused kernel that takes them)."""
    return _GRAPHSAFE and q.is_cuda and _fused_kind_of(q, k, v, is_causal) in _CUDA_KINDS


@contextmanager
def _drawing_from(rng: torch.Generator) -> Iterator[None]:
    """The fused kernels draw from the default CUDA generator: for the call, it shares the state
    of ``rng`` (the backend's generator), so the mask comes from ember's seeded stream and
    advances it, in and out of CUDA-graph capture (``rng`` is what ``em.capture`` registers)."""
    gen = torch.cuda.default_generators[rng.device.index or 0]
    if rng is gen:
        yield
        return
    own = gen.graphsafe_get_state()
    gen.graphsafe_set_state(rng.graphsafe_get_state())
    try:
        yield
    finally:
        gen.graphsafe_set_state(own)


def attention_dropout(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float,
    is_causal: bool,
    dropout_p: float,
    rng: torch.Generator,
) -> tuple[Tensor, tuple[Any, ...]]:
    """``(out, saved)``: fused attention dropping weights with probability ``dropout_p``; the
    residuals ``saved`` (the kernel, its outputs, the random seed and offset) let the backward
    draw the same mask again."""
    kind = _fused_kind_of(q, k, v, is_causal) if _GRAPHSAFE and q.is_cuda else ""
    if kind not in _CUDA_KINDS:
        raise DeviceError(
            "attention_dropout: no fused CUDA kernel takes these inputs "
            f"(dtype {q.dtype}, shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}); "
            "F.scaled_dot_product_attention draws the mask as a tensor for them."
        )
    qc, kc, vc = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
    with _drawing_from(rng):
        res = _fused_forward(kind, qc, kc, vc, scale, is_causal, dropout_p)
    return res[0], (kind, *res)


def attention_dropout_backward(
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    saved: tuple[Any, ...],
    scale: float,
    is_causal: bool,
    dropout_p: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """(grad q, grad k, grad v) of ``attention_dropout``; the kernel redraws the forward's mask
    from the saved seed and offset."""
    kind, *res = saved
    q, k, v = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
    return _fused_grads(kind, tuple(res), grad, q, k, v, scale, is_causal, dropout_p)


def attention_weights(q: Tensor, k: Tensor, bias: Tensor, scale: float, is_causal: bool) -> Tensor:
    """softmax(q k^T * scale + bias [+ causal mask]) of shape (..., L, S).

    A row whose scores are all -inf (every key masked out) gives weights 0, not NaN, as
    PyTorch's own attention does (its math path's ``_safe_softmax``); no gradient flows through it.
    """
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias.ndim:
        s = s + bias
    if is_causal:
        L, S = s.shape[-2:]
        causal = torch.ones((L, S), dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~causal, float("-inf"))
    return _safe_softmax(s)


# torch 2.5 on: the op PyTorch's math attention calls; older builds compose it
_SAFE_SOFTMAX = getattr(torch, "_safe_softmax", None)


def _safe_softmax_fallback(s: Tensor) -> Tensor:
    p = torch.softmax(s, -1)
    if s.numel() == 0:
        return p
    return p.masked_fill(s.amax(-1, keepdim=True) == float("-inf"), 0.0)


def _safe_softmax(s: Tensor) -> Tensor:
    """Softmax over the last dim; a row of all -inf gives 0 (a NaN score keeps its row NaN)."""
    return _SAFE_SOFTMAX(s, -1) if _SAFE_SOFTMAX is not None else _safe_softmax_fallback(s)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor,
    keep: Tensor,
    scale: float,
    is_causal: bool,
) -> Tensor:
    """Scaled dot-product attention; fused cuDNN / flash / memory-efficient kernels on CUDA."""
    kind = _fused_kind(q, k, v, bias, keep, is_causal)
    if kind:
        qc, kc, vc = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
        res = _fused_forward(kind, qc, kc, vc, scale, is_causal)
        # kept on the caller's q (not a contiguous copy): the backward is handed that object
        _remember(q, "sdpa", (k, v, scale, is_causal), (kind, res))
        return res[0]
    p = attention_weights(q, k, bias, scale, is_causal)
    if keep.ndim:
        p = p * keep
    return torch.matmul(p, v)


def attention_backward(
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor,
    keep: Tensor,
    scale: float,
    is_causal: bool,
) -> tuple[Tensor, ...] | Declined:
    """Gradients for q, k, v and the 0-d bias / keep placeholders from the fused kernel that ran
    the forward; ``NotImplemented`` where none takes these inputs (the row's rule runs)."""
    kind = _fused_kind(q, k, v, bias, keep, is_causal)
    if not kind:
        return NotImplemented
    return _fused_backward(kind, grad, q, k, v, bias, keep, scale, is_causal)


def _fused_backward(
    kind: str,
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor,
    keep: Tensor,
    scale: float,
    is_causal: bool,
) -> tuple[Tensor, ...]:
    saved = _recall(q, "sdpa", (k, v, scale, is_causal))
    q, k, v = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
    if saved is None or saved[0] != kind:
        res = _fused_forward(kind, q, k, v, scale, is_causal)
    else:
        res = saved[1]
    gq, gk, gv = _fused_grads(kind, res, grad, q, k, v, scale, is_causal, 0.0)
    # the bias and keep mask are 0-d "none" placeholders here: their gradients are 0-d zeros
    return gq, gk, gv, _zero_scalar(bias), _zero_scalar(keep)


def _fused_grads(
    kind: str,
    res: Any,
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float,
    is_causal: bool,
    p: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """The fused kernel's backward from its forward's outputs ``res`` (dropout ``p``)."""
    if kind == "cudnn":
        out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = res
        # cuDNN reads the incoming gradient in the output's strides (builds with cuDNN < 9.5.1
        # warn and copy, PyTorch's newest sources check them): copy only when they differ
        if grad.stride() != out.stride():
            grad = torch.empty_like(out).copy_(grad)
        gq, gk, gv = aten._scaled_dot_product_cudnn_attention_backward(
            grad,
            q,
            k,
            v,
            out,
            lse,
            seed,
            offset,
            None,
            cum_q,
            cum_k,
            max_q,
            max_k,
            p,
            is_causal,
            scale=scale,
        )
    elif kind == "flash_cpu":
        out, lse = res
        gq, gk, gv = aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad.contiguous(), q, k, v, out, lse, 0.0, is_causal, scale=scale
        )
    elif kind == "flash":
        # the CUDA kernels take the gradient in any layout, as PyTorch's autograd hands it over
        out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = res
        gq, gk, gv = aten._scaled_dot_product_flash_attention_backward(
            grad,
            q,
            k,
            v,
            out,
            lse,
            cum_q,
            cum_k,
            max_q,
            max_k,
            p,
            is_causal,
            seed,
            offset,
            scale=scale,
        )
    else:
        out, lse, seed, offset = res
        gq, gk, gv, _ = aten._scaled_dot_product_efficient_attention_backward(
            grad,
            q,
            k,
            v,
            None,
            out,
            lse,
            seed,
            offset,
            p,
            [True, True, True, False],
            is_causal,
            scale=scale,
        )
    return gq, gk, gv
