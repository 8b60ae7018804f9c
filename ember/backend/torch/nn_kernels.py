"""Torch kernels of the neural-network rows, mirroring ``ember/backend/numpy/nn_kernels.py``.

Each forward calls PyTorch's fused ATen kernel (cuDNN convolution, fused layer norm, softmax,
cross entropy, flash / memory-efficient attention on CUDA) and each ``*_backward`` calls the
matching ATen backward kernel directly, so torch's autograd is never involved.

Backward kernels of layer norm, batch norm, max pooling and fused attention need statistics that
the forward computed (mean and rstd, argmax indices, log-sum-exp). The forward remembers them on
its input tensor object (``_remember``); the backward, handed that same object by ember's engine,
reuses them, and recomputes them when they are missing (for example when gradient checkpointing
recomputed the input).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor
Pair = tuple[int, int]
aten = torch.ops.aten
_HALF = (torch.float16, torch.bfloat16)
_CPU_FLASH = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# ---------------------------------------------------------------- remembered statistics
def _remember(owner: Tensor, tag: str, ident: tuple[Any, ...], value: Any) -> None:
    """Keep ``value`` on ``owner`` for the backward of the same call (``ident`` names it)."""
    owner.__dict__["_ember_" + tag] = (ident, value)


def _recall(owner: Tensor, tag: str, ident: tuple[Any, ...]) -> Any:
    entry = owner.__dict__.get("_ember_" + tag)
    if entry is None:
        return None
    old, value = entry
    if len(old) != len(ident) or any(
        (a is not b) if isinstance(a, torch.Tensor) else (a != b) for a, b in zip(old, ident)
    ):
        return None
    return value


# ---------------------------------------------------------------- activations
def relu(x: Tensor) -> Tensor:
    return torch.relu(x)


def relu_backward(grad: Tensor, out: Tensor) -> Tensor:
    return aten.threshold_backward(grad, out, 0)


def sigmoid(x: Tensor) -> Tensor:
    return torch.sigmoid(x)


def softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)), stable for large |x| (no threshold switch, unlike F.softplus)."""
    return torch.log1p(torch.exp(-torch.abs(x))) + torch.clamp_min(x, 0)


def gelu(x: Tensor, approximate: str) -> Tensor:
    return F.gelu(x, approximate=approximate)


def gelu_backward(grad: Tensor, x: Tensor, approximate: str) -> Tensor:
    return aten.gelu_backward(grad, x, approximate=approximate)


def silu(x: Tensor) -> Tensor:
    return F.silu(x)


def silu_backward(grad: Tensor, x: Tensor) -> Tensor:
    return aten.silu_backward(grad, x)


# ---------------------------------------------------------------- softmax family
def softmax(x: Tensor, dim: int) -> Tensor:
    return torch.softmax(x, dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    return torch.log_softmax(x, dim)


def softmax_backward(grad: Tensor, out: Tensor, dim: int) -> Tensor:
    return aten._softmax_backward_data(grad, out, dim, out.dtype)


def log_softmax_backward(grad: Tensor, out: Tensor, dim: int) -> Tensor:
    return aten._log_softmax_backward_data(grad, out, dim, out.dtype)


# ---------------------------------------------------------------- losses
def cross_entropy(
    logits: Tensor, target: Tensor, ignore_index: int, label_smoothing: float
) -> Tensor:
    """(R, 2): per-row loss of (R, C) logits against (R,) class indices (0 on ignored rows) and
    the row's logsumexp (as x_t - log_softmax(x)_t: NaN where the target's logit is infinite)."""
    target = target.long()
    valid = target != ignore_index
    safe = torch.where(valid, target, 0).unsqueeze(1)
    # one fused log-softmax pass (logsumexp takes max, subtract, exp and sum passes over the
    # (R, C) logits, the largest tensor of a language model); lse = x_t - log_softmax(x)_t
    picked_logp = torch.gather(torch.log_softmax(logits, 1), 1, safe).squeeze(1)
    picked = torch.gather(logits, 1, safe).squeeze(1)
    lse = picked - picked_logp
    eps = label_smoothing
    if eps:
        # smoothed target: (1 - eps) on the label, eps / C spread over every class
        loss = lse - (1 - eps) * picked - eps * torch.mean(logits, 1)
    else:
        loss = -picked_logp
    return torch.stack((torch.where(valid, loss, 0), lse), 1)


def cross_entropy_backward(
    grad: Tensor,
    logits: Tensor,
    target: Tensor,
    out: Tensor,
    ignore_index: int,
    label_smoothing: float,
) -> Tensor:
    """Gradient for the logits from the (R, 2) gradient of ``cross_entropy``'s output ``out``.

    d loss / dx = softmax - smoothed one-hot (0 on ignored rows); d lse / dx = softmax, from one
    fused softmax pass (fewer passes over the logits than exp(x - lse) with the kept logsumexp).
    """
    target = target.long()
    valid = target != ignore_index
    safe = torch.where(valid, target, 0).unsqueeze(1)
    g_loss = torch.where(valid, grad[:, 0], 0).to(logits.dtype)
    g_soft = g_loss + grad[:, 1]
    # in place on one fresh (R, C) buffer: the logits of a language model are the largest tensor
    gx = torch.softmax(logits, 1)
    gx.mul_(g_soft.unsqueeze(1))
    gx.scatter_add_(1, safe, (g_loss * -(1 - label_smoothing)).unsqueeze(1))
    if label_smoothing:
        gx.sub_((g_loss * (label_smoothing / logits.shape[1])).unsqueeze(1))
    return gx


def _smooth(probs: Tensor, eps: float) -> Tensor:
    if not eps:
        return probs
    return probs * (1 - eps) + eps / probs.shape[1]


def cross_entropy_soft(logits: Tensor, probs: Tensor, label_smoothing: float) -> Tensor:
    """Per-row loss -sum_c t_c log_softmax(x)_c of (R, C) logits against (R, C) probabilities."""
    logp = torch.log_softmax(logits, 1)
    return -(_smooth(probs, label_smoothing) * logp).sum(1)


def cross_entropy_soft_backward(
    grad: Tensor, logits: Tensor, probs: Tensor, label_smoothing: float
) -> tuple[Tensor, Tensor]:
    logp = torch.log_softmax(logits, 1)
    t = _smooth(probs, label_smoothing)
    g = grad.unsqueeze(1)
    # d/dx_j = sum(t) softmax_j - t_j;  d/dt_j = -(1 - eps) log_softmax_j
    gx = (torch.exp(logp) * t.sum(1, keepdim=True) - t) * g
    gt = logp * (g * -(1 - label_smoothing))
    return gx, gt


def nll_loss(logp: Tensor, target: Tensor, ignore_index: int) -> Tensor:
    return F.nll_loss(logp, target.long(), ignore_index=ignore_index, reduction="none")


def nll_loss_backward(grad: Tensor, target: Tensor, num_classes: int, ignore_index: int) -> Tensor:
    target = target.long()
    valid = target != ignore_index
    out = torch.zeros((target.shape[0], num_classes), dtype=grad.dtype, device=grad.device)
    src = torch.where(valid, -grad, 0).to(grad.dtype).unsqueeze(1)
    return out.scatter_(1, torch.where(valid, target, 0).unsqueeze(1), src)


def bce(p: Tensor, t: Tensor) -> Tensor:
    """-(t log p + (1 - t) log(1 - p)), each log clamped at -100 (any real target, as NumPy)."""
    lp = torch.clamp_min(torch.log(p), -100)
    l1p = torch.clamp_min(torch.log1p(-p), -100)
    return -(t * lp + (1 - t) * l1p)


def bce_backward(grad: Tensor, p: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
    # d/dp = (p - t) / (p (1 - p)), the denominator kept >= 1e-12;  d/dt = log(1 - p) - log(p)
    gp = grad * (p - t) / torch.clamp_min(p * (1 - p), 1e-12)
    gt = grad * (torch.clamp_min(torch.log1p(-p), -100) - torch.clamp_min(torch.log(p), -100))
    return gp, gt


def bce_with_logits(x: Tensor, t: Tensor, pos_weight: Tensor) -> Tensor:
    """-(w t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))) with w = pos_weight, stably."""
    return pos_weight * t * softplus(-x) + (1 - t) * softplus(x)


# ---------------------------------------------------------------- normalisation
def _layer_stats(x: Tensor, normalized_ndim: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    shape = list(x.shape[x.ndim - normalized_ndim :])
    return torch.native_layer_norm(x, shape, None, None, eps)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, normalized_ndim: int, eps: float) -> Tensor:
    shape = list(x.shape[x.ndim - normalized_ndim :])
    out, mean, rstd = torch.native_layer_norm(x, shape, weight, bias, eps)
    _remember(x, "ln", (normalized_ndim, eps), (mean, rstd))
    return out


def layer_norm_backward(
    grad: Tensor, x: Tensor, weight: Tensor, normalized_ndim: int, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    stats = _recall(x, "ln", (normalized_ndim, eps))
    if stats is None:
        _, mean, rstd = _layer_stats(x, normalized_ndim, eps)
    else:
        mean, rstd = stats
    shape = list(x.shape[x.ndim - normalized_ndim :])
    # the bias argument only gives the bias gradient its shape, which is the weight's
    gx, gw, gb = aten.native_layer_norm_backward(
        grad, x, shape, mean, rstd, weight, weight, [True, True, True]
    )
    return gx, gw, gb


def _rms_scale(x: Tensor, normalized_ndim: int, eps: float) -> Tensor:
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    return torch.rsqrt(torch.mean(x * x, dims, keepdim=True) + eps)


def rms_norm(x: Tensor, weight: Tensor, normalized_ndim: int, eps: float) -> Tensor:
    return x * _rms_scale(x, normalized_ndim, eps) * weight


def rms_norm_backward(
    grad: Tensor, x: Tensor, weight: Tensor, normalized_ndim: int, eps: float
) -> tuple[Tensor, Tensor]:
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    other = tuple(range(x.ndim - normalized_ndim))
    scale = _rms_scale(x, normalized_ndim, eps)
    xhat = x * scale
    gw = (grad * xhat).sum(other) if other else grad * xhat
    gxhat = grad * weight
    # d xhat = scale * (gxhat - xhat * mean(gxhat * xhat))
    gx = (gxhat - xhat * torch.mean(gxhat * xhat, dims, keepdim=True)) * scale
    return gx, gw


def batch_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """Normalise with the batch statistics over every dim but 1."""
    out, mean, invstd = aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, eps)
    _remember(x, "bn", (eps,), (mean, invstd))
    return out


def batch_norm_backward(
    grad: Tensor, x: Tensor, weight: Tensor, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    stats = _recall(x, "bn", (eps,))
    if stats is None:
        _, mean, invstd = aten.native_batch_norm(x, weight, None, None, None, True, 0.0, eps)
    else:
        mean, invstd = stats
    gx, gw, gb = aten.native_batch_norm_backward(
        grad, x, weight, None, None, mean, invstd, True, eps, [True, True, True]
    )
    return gx, gw, gb


# ---------------------------------------------------------------- attention
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
    every other dtype (float64 above all: both kernels reject it) takes the exact math path
    (``_scores``). On the CPU, ATen's flash kernel ("flash_cpu") takes all four float dtypes.

    Example:
        >>> fused_attention_kernel(torch.float64, is_cuda=True)
        ''
    """
    if not is_cuda:
        return "flash_cpu" if dtype in _CPU_FLASH else ""
    if dtype in _HALF:
        return "flash"
    if dtype == torch.float32:
        return "efficient"
    return ""


def _fused_kind(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, keep: Tensor, causal: bool) -> str:
    """Which fused CUDA kernel computes this attention exactly: "flash", "efficient" or ""."""
    kind = fused_attention_kernel(q.dtype, q.is_cuda)
    if not kind or bias.ndim or keep.ndim or q.ndim != 4:
        return ""
    if not (q.dtype == k.dtype == v.dtype) or q.shape[-1] != v.shape[-1]:
        return ""
    if causal and q.shape[-2] != k.shape[-2]:
        return ""  # keep ember's top-left causal alignment on the exact path
    d = q.shape[-1]
    if kind != "flash_cpu" and (d % 8 or d > 256):
        return ""
    return kind


def _last_contiguous(x: Tensor) -> Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def _fused_forward(kind: str, q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool) -> Any:
    if kind == "flash_cpu":
        return torch._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    if kind == "flash":
        return aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
    return aten._scaled_dot_product_efficient_attention(
        q, k, v, None, True, 0.0, causal, scale=scale
    )


def _scores(q: Tensor, k: Tensor, bias: Tensor, scale: float, is_causal: bool) -> Tensor:
    """softmax(q k^T * scale + bias [+ causal mask]) of shape (..., L, S)."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias.ndim:
        s = s + bias
    if is_causal:
        L, S = s.shape[-2:]
        causal = torch.ones((L, S), dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~causal, float("-inf"))
    return torch.softmax(s, -1)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor,
    keep: Tensor,
    scale: float,
    is_causal: bool,
) -> Tensor:
    """Scaled dot-product attention; fused flash / memory-efficient kernels on CUDA."""
    kind = _fused_kind(q, k, v, bias, keep, is_causal)
    if kind:
        q, k, v = _last_contiguous(q), _last_contiguous(k), _last_contiguous(v)
        res = _fused_forward(kind, q, k, v, scale, is_causal)
        _remember(q, "sdpa", (k, v, scale, is_causal), (kind, res))
        return res[0]
    p = _scores(q, k, bias, scale, is_causal)
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
) -> tuple[Tensor, ...]:
    """Gradients for q, k, v, the additive bias (..., L, S) and the keep mask (..., L, S)."""
    kind = _fused_kind(q, k, v, bias, keep, is_causal)
    if kind:
        return _fused_backward(kind, grad, q, k, v, bias, keep, scale, is_causal)
    p = _scores(q, k, bias, scale, is_causal)
    pk = p * keep if keep.ndim else p
    gv = torch.matmul(pk.transpose(-1, -2), grad)
    gpk = torch.matmul(grad, v.transpose(-1, -2))
    gkeep = gpk * p if keep.ndim else _zero_scalar(keep)
    gp = gpk * keep if keep.ndim else gpk
    # softmax backward: ds = p * (gp - sum(gp * p))
    gs = p * (gp - (gp * p).sum(-1, keepdim=True))
    gbias = gs if bias.ndim else _zero_scalar(bias)
    gs = gs * scale
    gq = torch.matmul(gs, k)
    gk = torch.matmul(gs.transpose(-1, -2), q)
    return gq, gk, gv, gbias, gkeep


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
    grad = grad.contiguous()
    if kind == "flash_cpu":
        out, lse = res
        gq, gk, gv = aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad, q, k, v, out, lse, 0.0, is_causal, scale=scale
        )
    elif kind == "flash":
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
            0.0,
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
            0.0,
            [True, True, True, False],
            is_causal,
            scale=scale,
        )
    # the bias and keep mask are 0-d "none" placeholders here: their gradients are 0-d zeros
    return gq, gk, gv, _zero_scalar(bias), _zero_scalar(keep)


# ---------------------------------------------------------------- convolution
def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> Tensor:
    return aten.convolution(
        x, weight, bias, list(stride), list(padding), list(dilation), False, [0, 0], groups
    )


def conv2d_backward(
    grad: Tensor,
    x: Tensor,
    weight: Tensor,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
) -> tuple[Tensor | None, Tensor | None, Tensor]:
    """Gradients of ``conv2d`` for x, weight and bias (x and weight only when asked for)."""
    gx, gw, gb = aten.convolution_backward(
        grad,
        x,
        weight,
        [weight.shape[0]],
        list(stride),
        list(padding),
        list(dilation),
        False,
        [0, 0],
        groups,
        [need_input, need_weight, True],
    )
    return gx, gw, gb


def conv_transpose2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    groups: int,
    dilation: Pair,
) -> Tensor:
    """The adjoint of conv2d: ``weight`` is (C_in, C_out / groups, kh, kw)."""
    return aten.convolution(
        x,
        weight,
        bias,
        list(stride),
        list(padding),
        list(dilation),
        True,
        list(output_padding),
        groups,
    )


def conv_transpose2d_backward(
    grad: Tensor,
    x: Tensor,
    weight: Tensor,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
) -> tuple[Tensor | None, Tensor | None, Tensor]:
    # the output padding that gave grad's size: out = (h - 1) s - 2 p + d (k - 1) + op + 1
    kh, kw = weight.shape[2:]
    op = [
        grad.shape[2 + i]
        - ((x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + 1)
        for i, k in enumerate((kh, kw))
    ]
    gx, gw, gb = aten.convolution_backward(
        grad,
        x,
        weight,
        [weight.shape[1] * groups],
        list(stride),
        list(padding),
        list(dilation),
        True,
        op,
        groups,
        [need_input, need_weight, True],
    )
    return gx, gw, gb


# ---------------------------------------------------------------- pooling
def max_pool2d(x: Tensor, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair) -> Tensor:
    out, idx = aten.max_pool2d_with_indices(
        x, list(kernel_size), list(stride), list(padding), list(dilation), False
    )
    _remember(x, "maxpool", (kernel_size, stride, padding, dilation), idx)
    return out


def max_pool2d_backward(
    grad: Tensor,
    x: Tensor,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> Tensor:
    """Each output's gradient goes to the first maximum of its window."""
    args = (list(kernel_size), list(stride), list(padding), list(dilation))
    idx = _recall(x, "maxpool", (kernel_size, stride, padding, dilation))
    if idx is None:
        _, idx = aten.max_pool2d_with_indices(x, *args, False)
    return aten.max_pool2d_with_indices_backward(grad, x, *args, False, idx)


def avg_pool2d(x: Tensor, kernel_size: Pair, stride: Pair, padding: Pair) -> Tensor:
    """Mean over each window; zero padding counts in the divisor (count_include_pad=True)."""
    return aten.avg_pool2d(x, list(kernel_size), list(stride), list(padding), False, True, None)


def avg_pool2d_backward(
    grad: Tensor,
    input_shape: tuple[int, ...],
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
) -> Tensor:
    like = grad.new_empty(input_shape)  # the kernel reads only its shape
    return aten.avg_pool2d_backward(
        grad, like, list(kernel_size), list(stride), list(padding), False, True, None
    )


def adaptive_avg_pool2d(x: Tensor, output_size: Pair) -> Tensor:
    return aten._adaptive_avg_pool2d(x, list(output_size))


def adaptive_avg_pool2d_backward(grad: Tensor, input_shape: tuple[int, ...]) -> Tensor:
    return aten._adaptive_avg_pool2d_backward(grad, grad.new_empty(input_shape))


# ---------------------------------------------------------------- embedding
def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    return F.embedding(indices, weight)


def embedding_backward(grad: Tensor, indices: Tensor, num_embeddings: int) -> Tensor:
    """Sum the rows of ``grad`` (..., D) into a (num_embeddings, D) table at ``indices``."""
    if grad.is_cuda:
        # ATen's CUDA embedding backward counts its segments on the host (a sync); an
        # index_add keeps the step asynchronous
        d = grad.shape[-1]
        out = torch.zeros((num_embeddings, d), dtype=grad.dtype, device=grad.device)
        return out.index_add_(0, indices.reshape(-1), grad.reshape(-1, d))
    return aten.embedding_dense_backward(grad, indices, num_embeddings, -1, False)
