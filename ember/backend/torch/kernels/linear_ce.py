"""The per-chunk kernels of ``linear_cross_entropy`` (ember/ops/linear_ce.py) on torch.

``chunk_logsumexp(z)``: each row's float32 logsumexp of a (N, C) block of logits.
``ce_chunk_grad(z, lse, t, g, lo, keep, smooth, dtype)``: the block's logit gradient
``(exp(z - lse) - keep * onehot(t - lo) - smooth) * g`` in ``dtype``.

On CUDA each is one Triton pass over the block: the half-precision logits are read once and
widened in registers (no float32 copy of the block, no one-hot array). Elsewhere they are a few
in-place torch passes. Recomputing the logits chunk by chunk is what keeps the fused head's
memory low; these kernels keep its time close to one GEMM's.
"""

from __future__ import annotations

from typing import Any

import torch

try:  # Triton ships with CUDA builds of torch; CPU builds have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

_BLOCK = 1024


def _triton(z: torch.Tensor) -> bool:
    return triton is not None and z.is_cuda and z.ndim == 2 and z.numel() > 0


if triton is not None:  # pragma: no cover - compiled and run on CUDA only

    @triton.jit
    def _lse_rows(z, out, C, szn, szc, BLOCK: tl.constexpr) -> None:  # type: ignore[no-untyped-def]
        row = tl.program_id(0)
        base = z + row.to(tl.int64) * szn
        cols = tl.arange(0, BLOCK)
        top = tl.full((BLOCK,), float("-inf"), tl.float32)
        total = tl.zeros((BLOCK,), tl.float32)
        for c0 in range(0, C, BLOCK):
            c = c0 + cols
            v = tl.load(base + c * szc, mask=c < C, other=float("-inf")).to(tl.float32)
            new = tl.maximum(top, v)
            # lanes still at -inf on both sides add nothing (exp(-inf) = 0, not nan)
            scale = tl.where(new == float("-inf"), 0.0, tl.exp(top - new))
            add = tl.where(new == float("-inf"), 0.0, tl.exp(v - new))
            total = total * scale + add
            top = new
        m = tl.max(top, 0)
        s = tl.sum(total * tl.where(top == float("-inf"), 0.0, tl.exp(top - m)), 0)
        tl.store(out + row, m + tl.log(s))

    @triton.jit
    def _grad_rows(  # type: ignore[no-untyped-def]
        z, lse, t, g, d, C, lo, szn, szc, sdn, sdc, keep, smooth, BLOCK: tl.constexpr
    ) -> None:
        row = tl.program_id(0)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = c < C
        r64 = row.to(tl.int64)
        v = tl.load(z + r64 * szn + c * szc, mask=inside, other=0.0).to(tl.float32)
        p = tl.exp(v - tl.load(lse + row))
        p = p - tl.where(c + lo == tl.load(t + row), keep, 0.0) - smooth
        p = p * tl.load(g + row)
        tl.store(d + r64 * sdn + c * sdc, p.to(d.dtype.element_ty), mask=inside)


def chunk_logsumexp(z: torch.Tensor) -> torch.Tensor:
    """(N, 1) float32 logsumexp of each row of ``z`` (N, C)."""
    if not _triton(z):  # the default kernel's passes (the same non-finite results as NumPy's)
        w = z.float() if z.element_size() < 4 else z
        top = w.amax(dim=1, keepdim=True)
        return (w - top).exp_().sum(dim=1, keepdim=True).log_().add_(top)
    n, c = z.shape
    out = torch.empty((n, 1), dtype=torch.float32, device=z.device)
    _lse_rows[(n,)](z, out, c, z.stride(0), z.stride(1), BLOCK=_BLOCK)
    return out


def ce_chunk_grad(
    z: torch.Tensor,
    lse: torch.Tensor,
    t: torch.Tensor,
    g: torch.Tensor,
    lo: int,
    keep: float,
    smooth: float,
    dtype: Any,
) -> torch.Tensor:
    """``(exp(z - lse) - keep * onehot(t - lo) - smooth) * g`` in ``dtype`` (a torch dtype):
    ``z`` (N, C) logits, float32 ``lse`` / ``g`` (N, 1), int ``t`` (N, 1)."""
    n, c = z.shape
    if _triton(z):
        d = torch.empty((n, c), dtype=dtype, device=z.device)
        grid = (n, triton.cdiv(c, _BLOCK))
        _grad_rows[grid](
            z, lse.contiguous(), t.contiguous(), g.contiguous(), d, c, lo, z.stride(0),
            z.stride(1), d.stride(0), d.stride(1), float(keep), float(smooth), BLOCK=_BLOCK,
        )  # fmt: skip
        return d
    wide = z.float() if z.element_size() < 4 else z.clone()
    wide.sub_(lse).exp_()
    inside = (t >= lo) & (t < lo + c)
    cols = (t - lo).clamp(0, c - 1)
    wide.scatter_add_(1, cols, inside.to(wide.dtype) * -keep)
    if smooth:
        wide.sub_(smooth)
    wide.mul_(g)
    return wide if wide.dtype == dtype else wide.to(dtype)
