"""A weight-only int8 GEMM in Triton for CUDA: bf16/fp16 ``x`` (M, K) times int8 ``w`` (K, N)
with per-column scales ``s`` (N,), ``(x @ w) * s`` in ``x``'s dtype.

Each int8 tile of ``w`` is converted to ``x``'s dtype in registers and multiplied on the tensor
cores with float32 accumulation; the scales are applied in the epilogue. The float weight never
exists in memory: a batch-1 linear reads one byte per weight instead of two. Autotuned once per
(M, N, K); small M (decoding, batch-1 linears) takes 16-row tiles with narrow column blocks so
every SM streams part of the weight.
"""

from __future__ import annotations

from typing import Any

import torch

try:  # Triton ships with CUDA builds of torch; CPU builds have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

_DTYPES = (torch.bfloat16, torch.float16)


def available(x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether the kernel takes ``x @ w``: CUDA, Triton, a half-precision ``x``, int8 ``w``."""
    return (
        triton is not None
        and x.is_cuda
        and x.dtype in _DTYPES
        and w.dtype == torch.int8
        and w.ndim == 2
        and x.shape[-1] == w.shape[0]
        and x.numel() > 0
        and w.shape[1] > 0
    )


if triton is not None:  # pragma: no cover - compiled and run on CUDA only

    @triton.autotune(
        configs=[
            triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_stages=st, num_warps=w)
            for bm, bn, bk, st, w in (
                (16, 32, 256, 4, 4),
                (16, 64, 256, 4, 4),
                (16, 32, 512, 3, 4),
                (32, 64, 128, 4, 4),
                (64, 64, 128, 4, 4),
                (128, 128, 64, 4, 8),
                (128, 256, 64, 3, 8),
                (128, 128, 128, 3, 8),
            )
        ],
        key=["M", "N", "K"],
    )
    @triton.jit
    def _gemm(  # type: ignore[no-untyped-def]  # Triton reads the bare parameters
        x, w, s, out, M, N, K, sxm, sxk, swk, swn, ss, som, son,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr,
    ) -> None:  # fmt: skip
        pid = tl.program_id(0)
        n_m, n_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        width = G * n_n
        first = (pid // width) * G
        rows = min(n_m - first, G)
        pm = first + (pid % width) % rows
        pn = (pid % width) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        px = x + rm[:, None] * sxm + rk[None, :] * sxk
        pw = w + rk[:, None] * swk + rn[None, :] * swn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            left = K - k * BK
            a = tl.load(px, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0.0)
            b = tl.load(pw, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0)
            acc = tl.dot(a, b.to(a.dtype), acc)
            px += BK * sxk
            pw += BK * swk
        col = tl.load(s + rn * ss, mask=rn < N, other=0.0).to(tl.float32)
        res = acc * col[None, :]
        po = out + rm[:, None] * som + rn[None, :] * son
        tl.store(po, res.to(out.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def int8_weight_gemm(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``(x @ w) * s``: ``x`` (*, K) bf16/fp16, ``w`` (K, N) int8 (any strides), ``s`` (1, N)
    or (1, 1) -> (*, N) in ``x``'s dtype."""
    lead = x.shape[:-1]
    k, n = w.shape
    x2 = x.reshape(-1, k)
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    sv = s.reshape(-1)
    ss = sv.stride(0) if sv.shape[0] != 1 else 0

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

    _gemm[grid](
        x2, w, sv, out, m, n, k, x2.stride(0), x2.stride(1), w.stride(0), w.stride(1), ss,
        out.stride(0), out.stride(1),
    )  # fmt: skip
    return out.reshape(*lead, n)
