"""An int8 GEMM in Triton for CUDA: (M, K) @ (K, N) int8 -> int32, int32 accumulation.

On an H200 (bench/RESULTS.md) it ran (4096, 4096) @ (4096, 4096) at 1014 int8 TOPS against
854 for ``torch._int_mm`` and 812 TFLOP/s for bf16 ``@`` (right operand column-major, as a
quantized weight's ``W.T`` is). Used for products of at least ``MIN_SIDE`` on every side when
Triton is installed; ``torch._int_mm`` takes the rest. Autotuned once per (M, N, K).
"""

from __future__ import annotations

from typing import Any

import torch

try:  # Triton ships with CUDA builds of torch; CPU builds have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

MIN_SIDE = 1024


def available(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the Triton kernel takes ``a @ b`` (CUDA, Triton installed, large enough)."""
    return triton is not None and a.is_cuda and min(a.shape[0], a.shape[1], b.shape[1]) >= MIN_SIDE


if triton is not None:  # pragma: no cover - compiled and run on CUDA only

    @triton.autotune(
        configs=[
            triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_stages=st, num_warps=w)
            for bm, bn, bk, st, w in (
                (128, 128, 64, 5, 4),
                (128, 128, 128, 4, 8),
                (128, 256, 64, 4, 8),
                (256, 128, 64, 4, 8),
                (128, 256, 128, 3, 8),
                (256, 128, 128, 3, 8),
                (128, 128, 64, 6, 8),
            )
        ],
        key=["M", "N", "K"],
    )
    @triton.jit
    def _gemm(  # type: ignore[no-untyped-def]  # Triton reads the bare parameters
        a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr,
    ) -> None:  # fmt: skip
        pid = tl.program_id(0)
        n_m, n_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        width = G * n_n  # grouped order: G row-blocks share their column blocks in L2
        first = (pid // width) * G
        rows = min(n_m - first, G)
        pm = first + (pid % width) % rows
        pn = (pid % width) // rows
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        pa = a + rm[:, None] * sam + rk[None, :] * sak
        pb = b + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.int32)
        for k in range(0, tl.cdiv(K, BK)):
            left = K - k * BK
            x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0)
            y = tl.load(pb, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0)
            acc = tl.dot(x, y, acc, out_dtype=tl.int32)
            pa += BK * sak
            pb += BK * sbk
        pc = c + rm[:, None] * scm + rn[None, :] * scn
        tl.store(pc, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def int8_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for int8 ``a`` (M, K) and ``b`` (K, N) as int32 (any strides)."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=torch.int32, device=a.device)

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

    _gemm[grid](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
    )  # fmt: skip
    return c
