"""Products on ONNX Runtime's MLAS SGEMM (issue 20): ``conv.py``'s weight-gradient products
``a @ b^T`` and ``matmul.py``'s float32 matrix products (``matmul``, at the end).

The im2col weight gradient dW = g @ cols^T multiplies a few rows (output channels, M) by a few
more (C*kh*kw, N) over a long shared axis L (images x output positions). On a 2-core AVX-512
host MLAS ran these 2.1-4.2x faster than OpenBLAS on whole-batch products, 1.4-2.2x on the
chunks of ``conv_chunks.py`` (one thread each). Each product is a one-node graph ``Gemm(p, q,
transB=1)`` per group, written by ``onnx_proto.py``, its session kept in ``ort_conv``'s cache per
shape and thread count. (``MatMul`` on b^T, made contiguous by NumPy or a ``Transpose`` node,
ran 2-7x slower; ``com.microsoft`` ``FusedMatMul`` with transB as fast as ``Gemm``.)

The rule is static: float32 operands, L >= 256 and M, N >= 2. Shorter products gain less than
a session run costs (about 5 us), and a single row is a matrix-vector product, where OpenBLAS
was as fast one thread at a time. MLAS's kernel fills 16 output columns per pass, so the product
is computed as (b @ a^T)^T, with M as the columns, unless M leaves a larger share of its last
16 columns empty than N does: 1.15-1.6x faster at M = 16, 32, 64 against N = 144, 9, 288,
1.6x slower at LeNet's M = 6 against N = 25.

A product called from a pool share (the chunked weight gradient runs one per chunk on each pool
thread) runs one MLAS thread, as does one of fewer than ``_THREAD_CELLS`` output cells: MLAS
splits the output, and on LeNet's, ResNet's and the CNN's products (150-2304 cells over
L = 1088-26880) two threads ran 1.0-1.4x slower than one. Any other runs
``EMBER_NUM_THREADS``. ``EMBER_CONV=numpy`` and a missing onnxruntime turn the route off, as for
``ort_conv``.
"""

from __future__ import annotations

import numpy as np

from .onnx_proto import Node, model
from .ort_conv import _on, _run, _run_into
from .threads import _call_threads

_MIN_LENGTH = 256
_THREAD_CELLS = 1 << 14  # M * N below which the product runs one MLAS thread
_COLUMNS = 16  # output columns per pass of MLAS's SGEMM kernel (AVX-512; 2 x 8 with AVX2)
_OPSETS = {"": 17}


def _gemm_nt(rows: int, cols: int, length: int) -> bytes:
    """y (rows, cols) = Gemm(p (rows, length), q (cols, length), transB=1) = p @ q^T."""
    node = Node("Gemm", ["p", "q"], ["y"], {"transB": 1})
    inputs = {"p": (rows, length), "q": (cols, length)}
    return model([node], inputs, {"y": (rows, cols)}, opsets=_OPSETS)


def _empty(columns: int) -> float:
    """The share of MLAS's 16-column blocks that ``columns`` output columns leave empty."""
    padded = -(-columns // _COLUMNS) * _COLUMNS
    return (padded - columns) / padded


def takes(m: int, n: int, length: int) -> bool:
    """Whether the rule sends an (M, L) x (N, L)^T product to MLAS (float32 operands aside)."""
    return length >= _MIN_LENGTH and min(m, n) >= 2


def matmul_nt(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """a @ b^T for stacks a (G, M, L), b (G, N, L) -> (G, M, N) on MLAS; None where the route
    is off or the rule declines (``conv.py`` then runs OpenBLAS).

    Example:
        >>> a, b = np.ones((1, 2, 300), np.float32), np.ones((1, 3, 300), np.float32)
        >>> out = matmul_nt(a, b)
        >>> out is None or out.tolist() == [[[300.0] * 3] * 2]
        True
    """
    groups, m, length = a.shape
    n = b.shape[1]
    if not takes(m, n, length) or not _on(a, b):
        return None
    swap = _empty(m) <= _empty(n)  # M as MLAS's columns: y = b @ a^T, transposed back
    p, q = (b, a) if swap else (a, b)
    threads = 1 if m * n < _THREAD_CELLS else _call_threads()
    out = np.empty((groups, m, n), dtype=np.float32)
    args = (p.shape[1], q.shape[1], length)
    for i in range(groups):
        y = _run(_gemm_nt, args, {"p": p[i], "q": q[i]}, threads)
        if y is None:  # ORT logs why; OpenBLAS gives the result
            return None
        out[i] = y.T if swap else y
    return out


# ---------------------------------------------------------------- matrix products
MIN_MACS = 1 << 22  # below, OpenBLAS: MLAS ran 3 M products as fast, 0.6 M ones 1.2-1.7x slower


def _gemm(trans_a: int, trans_b: int) -> bytes:
    """y (m, n) = Gemm(a, b) for a (m, k), or (k, m) with ``trans_a``, and b (k, n), or
    (n, k) with ``trans_b``; every size varies between runs, so one session per pair of flags
    and thread count serves every shape."""
    node = Node("Gemm", ["a", "b"], ["y"], {"transA": trans_a, "transB": trans_b})
    a, b = (("k", "m") if trans_a else ("m", "k")), (("n", "k") if trans_b else ("k", "n"))
    return model([node], {"a": a, "b": b}, {"y": ("m", "n")}, opsets=_OPSETS)


def _stored(a: np.ndarray) -> tuple[np.ndarray, int] | None:
    """A matrix as the C-ordered array it is or is the transpose of, and whether transposed;
    None for other layouts."""
    if a.flags.c_contiguous:
        return a, 0
    if a.T.flags.c_contiguous:  # a weight's or a gradient's ``.T``
        return a.T, 1
    return None


def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """x @ y for float32 x (*, M, K) and y (K, N) -> (*, M, N) as one MLAS product over the
    flattened rows; None where the route is off or the layout is not one it takes (``x``
    C-ordered, or a transposed C-ordered matrix; ``y`` either), or the product is small.

    MLAS's threads (``EMBER_NUM_THREADS``, one inside a pool share) split the output's rows and
    columns, never the sums over K, so the bits do not depend on the thread count.

    Example:
        >>> a, b = np.ones((64, 32), np.float32), np.ones((64, 48), np.float32)
        >>> out = matmul(a.T, b)
        >>> out is None or (out.shape == (32, 48) and bool((out == 64).all()))
        True
    """
    if y.ndim != 2 or x.ndim < 2 or x.shape[-1] != y.shape[0]:
        return None
    rows, (k, n) = x.size // max(x.shape[-1], 1), y.shape
    if rows < 2 or n < 2 or rows * k * n < MIN_MACS:
        return None
    if x.ndim == 2:
        a = _stored(x)
    else:  # a stack of rows (a linear layer's (batch, T, K) input)
        a = (x.reshape(rows, k), 0) if x.flags.c_contiguous else None
    b = _stored(y)
    if a is None or b is None or not _on(x, y):
        return None
    out = np.empty((rows, n), dtype=np.float32)
    ran = _run_into(_gemm, (a[1], b[1]), {"a": a[0], "b": b[0]}, {"y": out}, _call_threads())
    if not ran:
        return None
    return out if x.ndim == 2 else out.reshape(*x.shape[:-1], n)
