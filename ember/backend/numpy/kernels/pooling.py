"""NumPy kernels of 2-d max, average and adaptive average pooling, forward and backward."""

from __future__ import annotations

from typing import Any

import numpy as np

from .im2col import Pair, _all_finite, _conv_out, _pad, _tap
from .threads import _parallel_split


def _pool_geometry(
    x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair
) -> Pair:
    h, w = x.shape[2:]
    return (
        _conv_out(h, kernel[0], stride[0], padding[0], dilation[0]),
        _conv_out(w, kernel[1], stride[1], padding[1], dilation[1]),
    )


def _taps(kernel: Pair, stride: Pair, dilation: Pair, out: Pair) -> list[Any]:
    """The slice key of each kernel tap, row-major: the (N, C, Ho, Wo) inputs that tap reads."""
    whole = slice(None)
    return [
        (whole, whole, *_tap(i, j, stride, dilation, out))
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]


def max_pool2d(
    x: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair, dilation: Pair
) -> np.ndarray:
    out = _pool_geometry(x, kernel_size, stride, padding, dilation)
    xp = _pad(x, padding, -np.inf)
    taps = _taps(kernel_size, stride, dilation, out)
    y = np.empty((*x.shape[:2], *out), dtype=x.dtype)

    def run(lo: int, hi: int) -> None:
        yb = y[lo:hi]
        np.copyto(yb, xp[lo:hi][taps[0]])
        for key in taps[1:]:
            np.maximum(yb, xp[lo:hi][key], out=yb)

    _parallel_split(x.shape[0], y.size * len(taps), run, blas=False)
    return y


def max_pool2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> np.ndarray:
    """Each output's gradient goes to the first maximum of its window (row-major tap order)."""
    out = grad.shape[2:]
    xp = _pad(x, padding, -np.inf)
    taps = _taps(kernel_size, stride, dilation, out)
    # disjoint windows: each input is read by at most one tap of one window, so assign; when
    # they also tile the padded input exactly, every element is written and zeros are not needed
    spans = [dilation[i] * (kernel_size[i] - 1) + 1 for i in range(2)]
    disjoint = all(stride[i] >= spans[i] for i in range(2))
    tiled = disjoint and all(
        stride[i] == spans[i] == kernel_size[i] and out[i] * stride[i] == xp.shape[2 + i]
        for i in range(2)
    )
    gxp = np.empty(xp.shape, dtype=grad.dtype) if tiled else np.zeros(xp.shape, dtype=grad.dtype)

    def run(lo: int, hi: int) -> None:
        xb, gb, gxb = xp[lo:hi], grad[lo:hi], gxp[lo:hi]
        vals = [xb[key] for key in taps]
        best = np.array(vals[0], copy=True)
        for v in vals[1:]:
            np.maximum(best, v, out=best)
        has_nan = bool(np.isnan(best).any())
        # the first tap equal to the window's maximum takes the gradient: ``taken`` marks the
        # windows already served (NaN counts as the maximum of a window that holds one)
        taken = None
        for i, key in enumerate(taps):
            first = np.equal(vals[i], best)
            if has_nan:
                first |= np.isnan(vals[i])
            if taken is not None:
                np.greater(first, taken, out=first)  # first and not taken
            if disjoint:
                np.multiply(gb, first, out=gxb[key])
            else:
                gxb[key] += np.multiply(gb, first)
            if i < len(taps) - 1:
                taken = first if taken is None else np.logical_or(taken, first, out=taken)

    _parallel_split(x.shape[0], grad.size * len(taps), run, blas=False)
    ph, pw = padding
    return gxp[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


def avg_pool2d(x: np.ndarray, kernel_size: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    """Mean over each window; zero padding counts in the divisor (count_include_pad=True)."""
    out = _pool_geometry(x, kernel_size, stride, padding, (1, 1))
    xp = _pad(x, padding)
    taps = _taps(kernel_size, stride, (1, 1), out)
    y = np.array(xp[taps[0]], copy=True)
    for key in taps[1:]:
        y += xp[key]
    y *= y.dtype.type(1.0 / (kernel_size[0] * kernel_size[1]))
    return y


def avg_pool2d_backward(
    grad: np.ndarray,
    input_shape: tuple[int, ...],
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
) -> np.ndarray:
    n, c, h, w = input_shape
    ph, pw = padding
    gxp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=grad.dtype)
    share = grad * grad.dtype.type(1.0 / (kernel_size[0] * kernel_size[1]))
    for key in _taps(kernel_size, stride, (1, 1), grad.shape[2:]):
        gxp[key] += share
    return gxp[:, :, ph : ph + h, pw : pw + w]


def _adaptive_matrix(size: int, out: int, dtype: np.dtype) -> np.ndarray:
    """(out, size) averaging matrix: row i averages bin i of ``_bins``."""
    m = np.zeros((out, size), dtype=dtype)
    for i, (lo, hi) in enumerate(_bins(size, out)):
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _bins(size: int, out: int) -> list[Pair]:
    """The ``out`` adaptive bins of an axis: bin i is [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _bin_means(x: np.ndarray, axis: int, out: int) -> np.ndarray:
    """Means of ``x`` over the adaptive bins of ``axis`` (2 or 3), which becomes ``out`` long:
    one slice mean per bin, so a NaN or inf reaches only the bins that hold it."""
    shape = list(x.shape)
    shape[axis] = out
    y = np.empty(shape, dtype=x.dtype)
    xs, ys = np.moveaxis(x, axis, 0), np.moveaxis(y, axis, 0)  # views, the binned axis first
    for i, (lo, hi) in enumerate(_bins(x.shape[axis], out)):
        ys[i] = xs[lo:hi].mean(axis=0)
    return y


def _bin_spread(g: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Adjoint of ``_bin_means``: each bin's value over its size, summed into an axis ``size``
    long (where bins overlap the shares add)."""
    shape = list(g.shape)
    shape[axis] = size
    y = np.zeros(shape, dtype=g.dtype)
    gs, ys = np.moveaxis(g, axis, 0), np.moveaxis(y, axis, 0)
    for i, (lo, hi) in enumerate(_bins(size, g.shape[axis])):
        ys[lo:hi] += gs[i] * g.dtype.type(1.0 / (hi - lo))
    return y


def adaptive_avg_pool2d(x: np.ndarray, output_size: Pair) -> np.ndarray:
    """Mean over each adaptive window (the bins of H and W are independent).

    Two products with averaging matrices; a NaN or inf in x meets those matrices' zeros too
    (0 * inf = NaN in every cell of its plane), so a non-finite result is computed again one
    bin at a time, where it reaches only the cells whose window holds it (as PyTorch). Every
    element of x has a positive weight in some cell, so a finite result means a finite x: the
    check reads only the output.
    """
    ah = _adaptive_matrix(x.shape[2], output_size[0], x.dtype)
    aw = _adaptive_matrix(x.shape[3], output_size[1], x.dtype)
    y = (ah @ x @ aw.T).astype(x.dtype, copy=False)
    if not _all_finite(y):
        y = _bin_means(_bin_means(x, 3, output_size[1]), 2, output_size[0])
    return np.ascontiguousarray(y)


def adaptive_avg_pool2d_backward(grad: np.ndarray, input_shape: tuple[int, ...]) -> np.ndarray:
    """Each window's gradient spread evenly over it; a non-finite gradient one bin at a time."""
    h, w = input_shape[2], input_shape[3]
    if not _all_finite(grad):
        return np.ascontiguousarray(_bin_spread(_bin_spread(grad, 2, h), 3, w))
    ah = _adaptive_matrix(h, grad.shape[2], grad.dtype)
    aw = _adaptive_matrix(w, grad.shape[3], grad.dtype)
    return np.ascontiguousarray((ah.T @ grad @ aw).astype(grad.dtype, copy=False))
