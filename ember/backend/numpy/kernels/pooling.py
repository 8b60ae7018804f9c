"""NumPy kernels of 2-d max, average and adaptive average pooling, forward and backward, and the
argmax indices of max pooling (window geometry: ``pool_windows``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from . import ort_pool
from .im2col import Pair, _all_finite
from .memo import Memo
from .pool_windows import avg_divisors, pad_widths, padded, pool_geometry, taps
from .threads import _parallel_split

# input elements from which the max-pool backward splits its batch between the pool's threads:
# below it the hand-off and the other core's reads of x cost more than the share saves (LeNet's
# pools, 0.3 and 0.1 M elements, took 1.33 ms a step split against 0.92 on one thread)
_SPLIT_BACKWARD = 1 << 20


def max_pool2d(
    x: np.ndarray,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool = False,
) -> np.ndarray:
    """(N, C, H, W) -> (N, C, Ho, Wo): the maximum of each window (-inf padding); float32 on
    MLAS where ``ort_pool`` takes it."""
    out = pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    y_ort = ort_pool.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, out)
    if y_ort is not None:
        # MLAS took it: x holds no NaN, so each window's maximum equals one of its taps
        _maxima.put(x, (kernel_size, stride, padding, dilation, ceil_mode), y_ort)
        return y_ort
    xp = padded(x, kernel_size, stride, padding, dilation, out, -np.inf)
    keys = taps(kernel_size, stride, dilation, out)
    y = np.empty((*x.shape[:2], *out), dtype=x.dtype)

    def run(lo: int, hi: int) -> None:
        yb = y[lo:hi]
        np.copyto(yb, xp[lo:hi][keys[0]])
        for key in keys[1:]:
            np.maximum(yb, xp[lo:hi][key], out=yb)

    _parallel_split(x.shape[0], y.size * len(keys), run, blas=False)
    return y


def max_pool2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool = False,
) -> np.ndarray:
    """Each output's gradient goes to the first maximum of its window (row-major tap order).

    ``grad`` has the output's shape, which fixes the windows (``ceil_mode`` is implied by it).
    The window maxima are the forward's output where it is still alive (``_maxima``), else
    found again from x; the taps that take the gradient are the same either way.
    """
    out = grad.shape[2:]
    xp = padded(x, kernel_size, stride, padding, dilation, out, -np.inf)
    keys = taps(kernel_size, stride, dilation, out)
    # disjoint windows: each input is read by at most one tap of one window, so assign; when
    # they also tile the padded input exactly, every element is written and zeros are not needed
    spans = [dilation[i] * (kernel_size[i] - 1) + 1 for i in range(2)]
    disjoint = all(stride[i] >= spans[i] for i in range(2))
    tiled = disjoint and all(
        stride[i] == spans[i] == kernel_size[i] and out[i] * stride[i] == xp.shape[2 + i]
        for i in range(2)
    )
    gxp = np.empty(xp.shape, dtype=grad.dtype) if tiled else np.zeros(xp.shape, dtype=grad.dtype)
    # a tap that is not its window's first maximum gets zero: a multiply by the bool mask,
    # unless grad holds a NaN or an infinity (times zero, NaN), which takes np.where (as does
    # a grad whose sum overflows)
    finite = _all_finite(grad)
    zero = np.zeros((), dtype=grad.dtype)
    y = _maxima.get(x, (kernel_size, stride, padding, dilation, ceil_mode))  # grad's shape

    def run(lo: int, hi: int) -> None:
        xb, gb, gxb = xp[lo:hi], grad[lo:hi], gxp[lo:hi]
        masks = _firsts(xb, keys) if y is None else _firsts_of(xb, keys, y[lo:hi])
        for key, first in zip(keys, masks, strict=True):
            if disjoint and finite:
                np.multiply(gb, first, out=gxb[key])
            elif disjoint:
                gxb[key] = np.where(first, gb, zero)
            else:
                gxb[key] += np.multiply(gb, first) if finite else np.where(first, gb, zero)

    work = grad.size * len(keys) if x.size >= _SPLIT_BACKWARD else 0
    _parallel_split(x.shape[0], work, run, blas=False)
    ph, pw = padding
    return gxp[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]]


# the output of each live array ``max_pool2d`` pooled on MLAS, by the call's geometry: the
# backward's window maxima. Held as long as x (a weak reference would not do: the engine frees
# the next layer's saved input, the output, before the pool's backward runs, and a view of an
# ORT output does not hold the array object); an inference pass drops x, and the entry with it,
# once the next layer has run. Reading them made LeNet's and the CNN's pool backwards 1.3-1.45x
# faster (one thread)
_maxima = Memo()


def _firsts(xb: np.ndarray, keys: list[Any]) -> Iterator[np.ndarray]:
    """Per tap (in ``keys`` order), a bool mask of the windows whose first maximum it is, each
    valid until the next is drawn; the maxima are found here (NaN counts as the maximum of a
    window that holds one)."""
    # each tap's values copied out once: the strided views cost NumPy's slow loops in every
    # op that reads them (copied, the max and compares below ran 1.3x faster)
    vals = [np.ascontiguousarray(xb[key]) for key in keys]
    best = vals[0].copy()
    for v in vals[1:]:
        np.maximum(best, v, out=best)
    has_nan = bool(np.isnan(best).any())
    # ``taken`` marks the windows already served
    taken = None
    for i, v in enumerate(vals):
        first = np.equal(v, best)
        if has_nan:
            first |= np.isnan(v)
        if taken is not None:
            np.greater(first, taken, out=first)  # first and not taken
        yield first
        if i < len(vals) - 1:
            taken = first if taken is None else np.logical_or(taken, first, out=taken)


def _firsts_of(xb: np.ndarray, keys: list[Any], best: np.ndarray) -> Iterator[np.ndarray]:
    """``_firsts`` given each window's maximum ``best``, which one of its taps equals (no NaN):
    one compare of the strided tap per tap, and none for the last, which takes the windows no
    earlier tap held."""
    hit = np.empty(best.shape, dtype=bool)
    left: np.ndarray | None = None  # windows whose maximum no earlier tap held
    for i, key in enumerate(keys):
        if left is not None and i == len(keys) - 1:
            yield left
            return
        np.equal(xb[key], best, out=hit)
        if left is None:
            left = np.logical_not(hit)
            yield hit
        else:
            np.logical_and(left, hit, out=hit)  # first: held and not held before
            np.not_equal(left, hit, out=left)
            yield hit


def _first_inside(out: int, s: int, p: int, d: int) -> np.ndarray:
    """Per window of an axis, its first tap inside the input (PyTorch's starting argmax)."""
    start = np.arange(out, dtype=np.int64) * s - p
    return start + d * ((np.maximum(-start, 0) + d - 1) // d)


def max_pool2d_indices(
    x: np.ndarray,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool = False,
) -> np.ndarray:
    """(N, C, Ho, Wo) int64: where each window's maximum is, as a flat index into its (H, W)
    plane. As PyTorch's CPU kernel: the first maximum in row-major tap order, a NaN replacing
    it (the last NaN of the window wins), padding never chosen (a window of -inf keeps its
    first tap inside the input)."""
    w = x.shape[3]
    out = pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    xp = padded(x, kernel_size, stride, padding, dilation, out, -np.inf)
    rows0 = _first_inside(out[0], stride[0], padding[0], dilation[0])
    cols0 = _first_inside(out[1], stride[1], padding[1], dilation[1])
    idx = np.empty((*x.shape[:2], *out), dtype=np.int64)
    idx[...] = rows0[:, None] * w + cols0[None, :]
    best = np.full(idx.shape, -np.inf, dtype=x.dtype)
    rows = np.arange(out[0], dtype=np.int64) * stride[0] - padding[0]
    cols = np.arange(out[1], dtype=np.int64) * stride[1] - padding[1]
    keys = taps(kernel_size, stride, dilation, out)
    for t, key in enumerate(keys):
        i, j = divmod(t, kernel_size[1])
        v = xp[key]
        take = np.greater(v, best)
        take |= np.isnan(v)
        np.copyto(best, v, where=take)
        flat = (rows + i * dilation[0])[:, None] * w + (cols + j * dilation[1])[None, :]
        np.copyto(idx, flat, where=take)
    return idx


def avg_pool2d(
    x: np.ndarray,
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> np.ndarray:
    """(N, C, H, W) -> (N, C, Ho, Wo): each window's sum over its divisor.

    The divisor is ``divisor_override`` when given, else the window's positions inside the
    padded input (``count_include_pad``) or inside the input; the overhang of ceil mode never
    counts.
    """
    one = (1, 1)
    out = pool_geometry(x.shape, kernel_size, stride, padding, one, ceil_mode)
    xp = padded(x, kernel_size, stride, padding, one, out, 0.0)
    keys = taps(kernel_size, stride, one, out)
    y = np.array(xp[keys[0]], copy=True)
    for key in keys[1:]:
        y += xp[key]
    div = avg_divisors(
        x.shape, kernel_size, stride, padding, out, count_include_pad, divisor_override, y.dtype
    )
    if isinstance(div, float):
        y *= y.dtype.type(1.0 / div)
    else:
        y /= div
    return y


def avg_pool2d_backward(
    grad: np.ndarray,
    input_shape: tuple[int, ...],
    kernel_size: Pair,
    stride: Pair,
    padding: Pair,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> np.ndarray:
    """Each window's gradient over its divisor, spread over its taps (``grad`` has the output's
    shape, which fixes the windows)."""
    n, c, h, w = input_shape
    one = (1, 1)
    out = grad.shape[2:]
    div = avg_divisors(
        input_shape,
        kernel_size,
        stride,
        padding,
        out,
        count_include_pad,
        divisor_override,
        grad.dtype,
    )
    share = grad * grad.dtype.type(1.0 / div) if isinstance(div, float) else grad / div
    (pt, pb), (pl, pr) = pad_widths(input_shape, kernel_size, stride, padding, one, out)
    gxp = np.zeros((n, c, pt + h + pb, pl + w + pr), dtype=grad.dtype)
    for key in taps(kernel_size, stride, one, out):
        gxp[key] += share
    ph, pw = padding
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
