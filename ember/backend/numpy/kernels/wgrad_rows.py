"""conv2d's weight gradient from kh stacked row shifts of x and kw offset views of the gradient.

im2col builds kh * kw shifted copies of x (the columns) for one product dW = g @ cols^T. Along a
row at horizontal stride 1 the kw taps differ only by a shift, and a shift of a flat array is an
offset view of it. With x padded and laid out as rows of the padded width Wp, and the gradient
laid out on the same grid (zeros in its Wp - Wo last columns, kw - 1 zeros in front), the tap
(a, b) pairs the a-th row stack of x with the gradient shifted by d * b:

    dW[o, c, a, b] = sum_q G[o, q - d * b] * X_a[c, q],   q over (n, i, j'), j' < Wp

where X_a[c, (n, i, j')] = xpad[n, c, s * i + d * a, j'] and G[o, (n, i, j)] = g[n, o, i, j]. A
shift that steps over a row's start reads the zero columns of the row before, so the rows do not
mix. The kw shifted gradients are stacked (O * kw, L) and meet the kh row stacks (kh * C, L) in
one product on MLAS (``ort_gemm``), a chunk of images at a time, one chunk in cache: kh copies
of x and kw of the gradient instead of im2col's kh * kw of x.

One product of kw * O rows instead of kw products of O rows (session 25; two threads of a 2-core
AVX-512 VM, per call, paired): ResNet's 16 -> 16 at 32x32 3.3 -> 2.3 ms, 32 -> 32 at 16x16 3.0
-> 1.9, the CNN's 32 -> 64 at 14x14 6.0 -> 5.4. Not taken below 16 input channels (im2col's one
product of kh * kw * C columns wins), where the zero columns pass 1/8 of the grid and at
horizontal stride 2 (its two phases each need their own stack). (ResNet's 64 -> 64 at 8x8, a
fifth of zero columns, ran 1.9 ms here against ORT's swapped-axes conv's 2.1; not taken, as the
chunks follow the pool's shares and small convs' gradients there would change bits with the
thread count.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import ort_gemm
from .conv_chunks import by_images, sum_parts
from .im2col import Pair, _all_finite
from .ort_conv import _on

Fill = Callable[[np.ndarray, int, int], None]  # fill(out, s, e): one row stack of images s:e

# x's row stacks per chunk (float32 bytes): 2 MiB ran 10-40% faster than 1 or 4 MiB
_CHUNK_BYTES = 1 << 21
_MIN_CHANNELS = 16  # fewer input channels: im2col's one product of kh * kw * C columns wins
_MAX_JUNK = 1 / 8  # the gradient grid's zero columns, at most this share of its width


def takes(
    x_shape: tuple[int, ...],
    grad_shape: tuple[int, ...],
    kernel: Pair,
    stride: Pair,
    dilation: Pair,
) -> bool:
    """Whether this kernel computes the weight gradient of a conv of x ``x_shape`` (N, C, H, W)
    to ``grad_shape`` (N, O, Ho, Wo): horizontal stride 1, a kernel wider than one column, at
    least ``_MIN_CHANNELS`` input channels and zero columns at most ``_MAX_JUNK`` of the
    grid."""
    shift = dilation[1] * (kernel[1] - 1)
    width = grad_shape[3] + shift
    return (
        stride[1] == 1
        and kernel[1] > 1
        and x_shape[1] >= _MIN_CHANNELS
        and grad_shape[2] * grad_shape[3] > 0
        and shift <= _MAX_JUNK * width
    )


def weight_grad(
    grad: np.ndarray,
    x: np.ndarray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> np.ndarray | None:
    """conv2d's weight gradient (groups 1): grad (N, O, Ho, Wo), x (N, C, H, W) ->
    (O, C, kh, kw), float32 on MLAS; None where ``takes`` declines, the route is off, or the
    result is not finite (a non-finite x met the gradient's zero columns: the caller's kernel
    keeps its semantics)."""
    if not takes(x.shape, grad.shape, kernel, stride, dilation) or not _on(grad, x):
        return None
    n, c = x.shape[:2]
    o, ho, wo = grad.shape[1:]
    kh, kw = kernel
    lead = dilation[1] * (kw - 1)  # the gradient's zeros in front: the largest shift
    wq = wo + lead  # the grid's width: x's padded width, the columns the taps read
    rows = _x_rows(x, kh, stride[0], padding, dilation[0], ho, wq)
    per = max(1, _CHUNK_BYTES // max(kh * c * ho * wq * x.dtype.itemsize, 1))
    parts: dict[int, np.ndarray] = {}

    def run(lo: int, hi: int) -> None:
        with np.errstate(invalid="ignore", over="ignore"):  # a non-finite x: declined below
            chunks(lo, hi)

    def chunks(lo: int, hi: int) -> None:
        acc = None
        for s in range(lo, hi, per):
            e = min(hi, s + per)
            length = (e - s) * ho * wq
            stack = np.empty((kh, c, e - s, ho, wq), dtype=np.float32)
            for a, fill in enumerate(rows):
                fill(stack[a], s, e)
            flat = stack.reshape(1, kh * c, length)
            buf = np.zeros(lead + o * length, dtype=np.float32)
            buf[lead:].reshape(o, e - s, ho, wq)[..., :wo] = grad[s:e].transpose(1, 0, 2, 3)
            taps = _shifts(buf, o, kw, dilation[1], length)
            p = ort_gemm.matmul_nt(taps, flat)  # None for a short chunk: OpenBLAS
            prod = (taps[0] @ flat[0].T) if p is None else p[0]
            acc = prod if acc is None else np.add(acc, prod, out=acc)
        if acc is not None:
            parts[lo] = acc

    by_images(n, grad.size * c * kh * kw, run)
    if not parts:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        total = sum_parts(parts)
    # rows (o, r) hold tap b = kw - 1 - r, columns (a, c)
    gw = np.ascontiguousarray(total.reshape(o, kw, kh, c)[:, ::-1].transpose(0, 3, 2, 1))
    return gw if _all_finite(gw) else None


def _shifts(buf: np.ndarray, o: int, kw: int, dilation: int, length: int) -> np.ndarray:
    """The kw shifted gradients stacked, (1, O * kw, L): row (o, r) is G[o] shifted by
    ``dilation * (kw - 1 - r)``, read from ``buf`` (the lead zeros, then G's O rows of L)."""
    size = buf.itemsize
    view = np.lib.stride_tricks.as_strided(
        buf, (o, kw, length), (length * size, dilation * size, size), writeable=False
    )
    return np.ascontiguousarray(view).reshape(1, o * kw, length)


def _x_rows(
    x: np.ndarray, kh: int, stride: int, padding: Pair, dilation: int, ho: int, wq: int
) -> list[Fill]:
    """One filler per kernel row a: ``fill(out, s, e)`` writes X_a of images s:e into ``out``
    (C, e - s, Ho, Wq): row i of x's padded row s * i + d * a, zeros where that is padding."""
    h, w = x.shape[2:]
    ph, pw = padding
    left = min(pw, wq)  # the grid's columns left of x
    cols = max(0, min(w, wq - pw))  # x's columns the grid reaches (fewer past the last window)
    fillers: list[Fill] = []
    for a in range(kh):
        first = dilation * a - ph  # x's row for output row 0
        i0 = min(ho, (stride - 1 - first) // stride) if first < 0 else 0  # rows past the top
        i1 = ho
        while i1 > i0 and stride * (i1 - 1) + first >= h:
            i1 -= 1
        fillers.append(_filler(x, (first, stride, i0, i1), left, cols))
    return fillers


def _filler(x: np.ndarray, rows: tuple[int, int, int, int], left: int, cols: int) -> Fill:
    """X_a's filler: output rows i0:i1 read x's rows first + stride * i (``rows`` = (first,
    stride, i0, i1)), ``cols`` of its columns from grid column ``left``; the rest are zero."""
    first, stride, i0, i1 = rows

    def fill(out: np.ndarray, s: int, e: int) -> None:
        if i1 <= i0 or cols == 0:
            out[...] = 0
            return
        src = x[s:e, :, first + stride * i0 : first + stride * (i1 - 1) + 1 : stride, :cols]
        out[:, :, :i0] = 0
        out[:, :, i1:] = 0
        out[:, :, i0:i1, :left] = 0
        out[:, :, i0:i1, left + cols :] = 0
        out[:, :, i0:i1, left : left + cols] = src.transpose(1, 0, 2, 3)

    return fill
