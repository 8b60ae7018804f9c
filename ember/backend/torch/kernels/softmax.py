"""Torch kernels of the fused softmax family: softmax, log-softmax, cross-entropy and nll."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .stats import Tensor, aten

# the forwards are the torch functions themselves: no Python frame per call
softmax = torch.softmax
log_softmax = torch.log_softmax


def softmax_backward(grad: Tensor, out: Tensor, dim: int) -> Tensor:
    return aten._softmax_backward_data(grad, out, dim, out.dtype)


def log_softmax_backward(grad: Tensor, out: Tensor, dim: int) -> Tensor:
    return aten._log_softmax_backward_data(grad, out, dim, out.dtype)


_HALF = (torch.float16, torch.bfloat16)


def _acc(dtype: torch.dtype) -> torch.dtype | None:
    """float32 for float16/bfloat16 logits (the dtype their rows accumulate and return in)."""
    return torch.float32 if dtype in _HALF else None


# rows per block of the log-softmax scratch: at most this many float32 elements (256 MB) live
# at once, so a language model's (R, C) logits never get a full-size float32 companion
_SCRATCH_ELEMENTS = 1 << 26


def _picked_log_softmax(
    logits: Tensor, safe: Tensor, acc: torch.dtype | None, row_sums: bool
) -> tuple[Tensor, Tensor | None]:
    """log_softmax(logits)[r, safe[r]] for each row, in ``acc`` (or the logits' dtype), and with
    ``row_sums`` each row's sum of log_softmax(logits) (else None).

    Rows are independent, so blocks of rows give the same bits as one call; blocking bounds
    the transient log-softmax buffer (and torch's float32 conversion of bfloat16 input).
    """
    r, c = logits.shape
    step = max(1, _SCRATCH_ELEMENTS // max(c, 1))
    picked, sums = [], []
    # one block when the rows fit (zero rows included)
    blocks = zip(range(0, r, step), safe.split(step)) if r > step else [(0, safe)]
    for lo, s in blocks:
        logp = torch.log_softmax(logits[lo : lo + step], 1, dtype=acc)
        picked.append(torch.gather(logp, 1, s).squeeze(1))
        if row_sums:
            sums.append(torch.sum(logp, 1))
    if len(picked) == 1:
        return picked[0], (sums[0] if row_sums else None)
    return torch.cat(picked), (torch.cat(sums) if row_sums else None)


def cross_entropy(
    logits: Tensor, target: Tensor, ignore_index: int, label_smoothing: float
) -> tuple[Tensor, Tensor]:
    """(loss, lse): the (R,) per-row loss of (R, C) logits against (R,) class indices (0 on
    ignored rows), and the residual logsumexp of each row (as x_t - log_softmax(x)_t: NaN where
    the target's logit is infinite).

    float16/bfloat16 logits are read as they are and the result is float32: the log-softmax runs
    in float32 over blocks of rows (``_SCRATCH_ELEMENTS``), so no float32 copy of the logits
    exists at any time.
    """
    acc = _acc(logits.dtype)
    target = target.long()
    valid = target != ignore_index
    safe = torch.where(valid, target, 0).unsqueeze(1)
    # one fused log-softmax pass (logsumexp takes max, subtract, exp and sum passes over the
    # (R, C) logits, the largest tensor of a language model); lse = x_t - log_softmax(x)_t
    eps = label_smoothing
    picked_logp, sum_logp = _picked_log_softmax(logits, safe, acc, row_sums=bool(eps))
    picked = torch.gather(logits, 1, safe).squeeze(1).to(picked_logp.dtype)
    lse = picked - picked_logp
    if sum_logp is not None:
        # smoothed target: (1 - eps) on the label, eps / C spread over every class. Summing the
        # log-softmax (not lse - the logits' mean) keeps a -inf target logit's loss inf, as
        # PyTorch: the residual lse is NaN there
        loss = (1 - eps) * -picked_logp - (eps / logits.shape[1]) * sum_logp
    else:
        loss = -picked_logp
    return torch.where(valid, loss, 0), lse


def cross_entropy_backward(
    grad: Tensor,
    logits: Tensor,
    target: Tensor,
    lse: Tensor,
    ignore_index: int,
    label_smoothing: float,
) -> Tensor:
    """Gradient for the logits from the (R,) gradient of ``cross_entropy``'s per-row loss.

    d loss / dx = softmax - smoothed one-hot (0 on ignored rows), from one fused softmax pass
    (fewer passes over the logits than exp(x - lse) with the residual logsumexp ``lse``).
    The gradient has the logits' dtype: for float16/bfloat16 the softmax accumulates in float32
    and writes the low-precision buffer, and the per-row scalars are cast to it.
    """
    dt = logits.dtype
    target = target.long()
    valid = target != ignore_index
    safe = torch.where(valid, target, 0).unsqueeze(1)
    g_loss = torch.where(valid, grad, 0)
    g_soft = g_loss.to(dt)
    # in place on one fresh (R, C) buffer: the logits of a language model are the largest tensor.
    # Full (R, C) passes: softmax (read x, write gx), mul_ (read and write gx), and with label
    # smoothing one sub_; scatter_add_ touches one element per row.
    gx = torch.softmax(logits, 1)
    gx.mul_(g_soft.unsqueeze(1))
    gx.scatter_add_(1, safe, (g_loss * -(1 - label_smoothing)).to(dt).unsqueeze(1))
    if label_smoothing:
        gx.sub_((g_loss * (label_smoothing / logits.shape[1])).to(dt).unsqueeze(1))
    return gx


def _smooth(probs: Tensor, eps: float) -> Tensor:
    if not eps:
        return probs
    return probs * (1 - eps) + eps / probs.shape[1]


def cross_entropy_soft(logits: Tensor, probs: Tensor, label_smoothing: float) -> Tensor:
    """Per-row loss -sum_c t_c log_softmax(x)_c of (R, C) logits against (R, C) probabilities
    (float32 for float16/bfloat16 logits, computed in float32)."""
    acc = _acc(logits.dtype)
    logp = torch.log_softmax(logits, 1, dtype=acc)
    return -(_smooth(probs.to(logp.dtype), label_smoothing) * logp).sum(1)


def cross_entropy_soft_backward(
    grad: Tensor, logits: Tensor, probs: Tensor, label_smoothing: float
) -> tuple[Tensor, Tensor]:
    logp = torch.log_softmax(logits, 1, dtype=_acc(logits.dtype))
    t = _smooth(probs.to(logp.dtype), label_smoothing)
    g = grad.unsqueeze(1)
    # d/dx_j = sum(t) softmax_j - t_j;  d/dt_j = -(1 - eps) log_softmax_j
    gx = (torch.exp(logp) * t.sum(1, keepdim=True) - t) * g
    gt = logp * (g * -(1 - label_smoothing))
    # half inputs: computed in float32, the gradients return to the inputs' dtypes
    return gx.to(logits.dtype), gt.to(probs.dtype)


def nll_loss(logp: Tensor, target: Tensor, ignore_index: int) -> Tensor:
    return F.nll_loss(logp, target.long(), ignore_index=ignore_index, reduction="none")


def nll_loss_backward(grad: Tensor, target: Tensor, num_classes: int, ignore_index: int) -> Tensor:
    target = target.long()
    valid = target != ignore_index
    out = torch.zeros((target.shape[0], num_classes), dtype=grad.dtype, device=grad.device)
    src = torch.where(valid, -grad, 0).to(grad.dtype).unsqueeze(1)
    return out.scatter_(1, torch.where(valid, target, 0).unsqueeze(1), src)
