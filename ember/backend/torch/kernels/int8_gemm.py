"""An int8 GEMM in Triton for CUDA: (M, K) @ (K, N) int8 -> int32, int32 accumulation, or
float32 with the row and column scales of two quantized operands applied in the epilogue
(``acc * (sa[m] * sb[n])``: the same float32 operations as scaling the int32 result after).

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
                (128, 256, 128, 4, 8),
                (256, 128, 128, 4, 8),
                (128, 128, 128, 5, 4),
                (128, 128, 256, 3, 8),
            )
        ],
        key=["M", "N", "K"],
    )
    @triton.jit
    def _gemm(  # type: ignore[no-untyped-def]  # Triton reads the bare parameters
        a, b, c, sa, sb, M, N, K, sam, sak, sbk, sbn, scm, scn, ssa, ssb,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr,
        SCALED: tl.constexpr,
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
        keep = (rm[:, None] < M) & (rn[None, :] < N)
        if SCALED:  # scales: (M,) rows and (N,) columns, stride 0 for one per tensor
            row = tl.load(sa + rm * ssa, mask=rm < M, other=0.0)
            col = tl.load(sb + rn * ssb, mask=rn < N, other=0.0)
            tl.store(pc, acc.to(tl.float32) * (row[:, None] * col[None, :]), mask=keep)
        else:
            tl.store(pc, acc, mask=keep)


def int8_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor | None = None,
    scale_b: torch.Tensor | None = None,
) -> torch.Tensor:
    """``a @ b`` for int8 ``a`` (M, K) and ``b`` (K, N) (any strides): int32, or float32
    ``(a @ b) * (scale_a * scale_b)`` given float32 scales ``scale_a`` (M, 1) or (1, 1) and
    ``scale_b`` (1, N) or (1, 1)."""
    m, k = a.shape
    n = b.shape[1]
    scaled = scale_a is not None and scale_b is not None
    c = torch.empty((m, n), dtype=torch.float32 if scaled else torch.int32, device=a.device)
    if scaled:
        assert scale_a is not None and scale_b is not None
        sa, sb = scale_a.reshape(-1), scale_b.reshape(-1)
        ssa, ssb = int(sa.shape[0] != 1) * sa.stride(0), int(sb.shape[0] != 1) * sb.stride(0)
    else:
        sa, sb, ssa, ssb = c, c, 0, 0  # unread

    def grid(meta: dict[str, Any]) -> tuple[int]:
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

    _gemm[grid](
        a, b, c, sa, sb, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), ssa, ssb, SCALED=scaled,
    )  # fmt: skip
    return c
