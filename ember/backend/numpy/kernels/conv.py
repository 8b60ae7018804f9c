"""NumPy kernels of 2-d convolution and transposed convolution, forward and backward.

Each uses the im2col columns of ``im2col.py`` and one matrix product per group.
"""

from __future__ import annotations

import numpy as np

from .blas import serial
from .im2col import Pair, _all_finite, _Geometry
from .pool import _PARALLEL_MIN, _get_pool, _parallel_split, _unsplit, num_threads


def _matmul_nt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b^T for stacks a (G, M, L), b (G, N, L) with a long shared axis L.

    Computed as (b @ a^T)^T, the larger operand first, and for very long L summed over chunks
    of 4096: OpenBLAS is several times slower on these (small M, N; large L) shapes otherwise
    (measured on LeNet's weight gradients). The pool's threads each take an equal share of L
    and keep a partial sum.
    """
    length = a.shape[-1]
    step = 4096 if length > 16384 else max(length, 1)
    partial: dict[int, np.ndarray] = {}

    def run(lo: int, hi: int) -> None:
        acc = None
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            p = b[..., s:e] @ a[..., s:e].transpose(0, 2, 1)
            acc = p if acc is None else np.add(acc, p, out=acc)
        if acc is not None:
            partial[lo] = acc

    _parallel_split(length, (a.shape[1] + b.shape[1]) * a.shape[0] * length, run)
    if not partial:
        return np.zeros((a.shape[0], a.shape[1], b.shape[1]), dtype=np.result_type(a, b))
    parts = list(partial.values())
    out = parts[0]
    for p in parts[1:]:
        out += p
    return np.ascontiguousarray(out.transpose(0, 2, 1))


def _matmul_wide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (G, M, K) @ b (G, K, L) for a wide L, its columns split between the pool's threads.

    With a short K (a first layer's few taps) each thread works through 4096-column chunks,
    which keeps the operand in cache: twice as fast as one product on LeNet's first layer.
    """
    length = b.shape[-1]
    out = np.empty((a.shape[0], a.shape[1], length), dtype=np.result_type(a, b))
    step = 4096 if a.shape[2] <= 64 else max(length, 1)

    def run(lo: int, hi: int) -> None:
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            np.matmul(a, b[..., s:e], out=out[..., s:e])

    _parallel_split(length, out.size * a.shape[2] // 8, run)
    return out


def _weight_rows(weight: np.ndarray, groups: int) -> np.ndarray:
    """(O, Cg, kh, kw) -> (G, O/G, Cg*kh*kw)."""
    return weight.reshape(groups, weight.shape[0] // groups, -1)


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> np.ndarray:
    geo = _Geometry(x.shape, (weight.shape[2], weight.shape[3]), stride, padding, dilation)
    y = geo.unrows(_matmul_wide(_weight_rows(weight, groups), geo.im2col(x, groups)))
    y += bias.reshape(1, -1, 1, 1)
    return y


def conv2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """Gradients of ``conv2d`` for x, weight and bias (x and weight only when asked for)."""
    geo = _Geometry(x.shape, (weight.shape[2], weight.shape[3]), stride, padding, dilation)
    g = geo.rows(grad, groups)  # (G, Og, N*columns)

    def weight_grad() -> np.ndarray:
        # dW = g @ cols^T; the columns are rebuilt from x rather than kept from the forward
        gw = _matmul_nt(g, geo.im2col(x, groups)).reshape(weight.shape)
        if not _all_finite(gw) and geo.has_junk:
            # a non-finite x in a junk column met g's zero there (0 * inf = NaN): again without
            gw = _matmul_nt(g, geo.im2col(x, groups, zero_junk=True)).reshape(weight.shape)
        return gw

    def input_grad() -> np.ndarray:
        dcols = _matmul_wide(_weight_rows(weight, groups).transpose(0, 2, 1), g)
        return geo.col2im(dcols, zero_junk=not _all_finite(weight))

    gx = gw = None
    if need_weight and need_input and num_threads() > 1 and g.size * 8 >= _PARALLEL_MIN:
        # the two gradients are independent: one pool thread each, instead of splitting both
        with serial():
            gw_future = _get_pool().submit(_unsplit, weight_grad)
            gx = _unsplit(input_grad)
            gw = gw_future.result()
    else:
        gw = weight_grad() if need_weight else None
        gx = input_grad() if need_input else None
    return gx, gw, g.sum(axis=2).reshape(-1)


def conv_transpose2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    groups: int,
    dilation: Pair,
) -> np.ndarray:
    """The adjoint of conv2d: ``weight`` is (C_in, C_out / groups, kh, kw)."""
    n, _, h, w = x.shape
    _, og, kh, kw = weight.shape
    out_shape = (
        n,
        og * groups,
        (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1,
        (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1,
    )
    # a conv2d from the output back to x has weight (C_in, C_out/G, kh, kw) = (O, Cg, kh, kw):
    # this op is that conv's input gradient
    geo = _Geometry(out_shape, (kh, kw), stride, padding, dilation)
    dcols = _matmul_wide(_weight_rows(weight, groups).transpose(0, 2, 1), geo.rows(x, groups))
    y = geo.col2im(dcols, zero_junk=not _all_finite(weight))
    y += bias.reshape(1, -1, 1, 1)
    return y


def conv_transpose2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    geo = _Geometry(grad.shape, (weight.shape[2], weight.shape[3]), stride, padding, dilation)
    gx = gw = None
    if need_input or need_weight:
        cols = geo.im2col(grad, groups)
        if need_input:
            gx = geo.unrows(_matmul_wide(_weight_rows(weight, groups), cols))
        if need_weight:
            xrows = geo.rows(x, groups)
            gw = _matmul_nt(xrows, cols).reshape(weight.shape)
            if not _all_finite(gw) and geo.has_junk:  # as in conv2d_backward
                gw = _matmul_nt(xrows, geo.im2col(grad, groups, zero_junk=True))
                gw = gw.reshape(weight.shape)
    return gx, gw, grad.sum(axis=(0, 2, 3))
