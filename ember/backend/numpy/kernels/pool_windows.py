"""Window geometry of the NumPy 2-d pooling kernels: output sizes (floor or ceil mode), the
padding each side needs, the taps each window reads and the divisors of average pooling.

Along one axis of size ``n`` with kernel ``k``, stride ``s``, padding ``p`` and dilation ``d``,
window ``o`` covers padded positions ``o*s + t*d`` for taps ``t < k``. In ceil mode the output
rounds up, but (as PyTorch) the last window must start inside the input or its left padding;
the padded input then gets extra positions on the right (``-inf`` for max, zeros for the sums
of average pooling, which its divisors leave out).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .im2col import Pair, _tap


def window_count(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """How many windows fit along an axis (PyTorch's pooling output size; <= 0 when none)."""
    span = d * (k - 1) + 1
    out = (n + 2 * p - span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1  # the last window would start in the right padding
    return out


def pad_after(n: int, k: int, s: int, p: int, d: int, out: int) -> int:
    """The padding after the input that ``out`` windows read (``p``, or more in ceil mode)."""
    return max(p, (out - 1) * s + d * (k - 1) + 1 - n - p)


def pool_geometry(
    x_shape: tuple[int, ...],
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    ceil_mode: bool,
) -> Pair:
    """(Ho, Wo) of a pooling of an (N, C, H, W) input."""
    return (
        window_count(x_shape[2], kernel[0], stride[0], padding[0], dilation[0], ceil_mode),
        window_count(x_shape[3], kernel[1], stride[1], padding[1], dilation[1], ceil_mode),
    )


def pad_widths(
    x_shape: tuple[int, ...], kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, out: Pair
) -> tuple[Pair, Pair]:
    """((top, bottom), (left, right)): ``padding`` before, what ``out`` windows read after."""
    return (
        (padding[0], pad_after(x_shape[2], kernel[0], stride[0], padding[0], dilation[0], out[0])),
        (padding[1], pad_after(x_shape[3], kernel[1], stride[1], padding[1], dilation[1], out[1])),
    )


def padded(
    x: np.ndarray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    out: Pair,
    value: float,
) -> np.ndarray:
    """``x`` (N, C, H, W) padded with ``value`` as ``pad_widths`` says."""
    rows, cols = pad_widths(x.shape, kernel, stride, padding, dilation, out)
    if not any(rows) and not any(cols):
        return x
    return np.pad(x, ((0, 0), (0, 0), rows, cols), constant_values=value)


def taps(kernel: Pair, stride: Pair, dilation: Pair, out: Pair) -> list[Any]:
    """The slice key of each kernel tap, row-major: the (N, C, Ho, Wo) inputs that tap reads."""
    whole = slice(None)
    return [
        (whole, whole, *_tap(i, j, stride, dilation, out))
        for i in range(kernel[0])
        for j in range(kernel[1])
    ]


def _axis_divisors(n: int, k: int, s: int, p: int, out: int, include_pad: bool) -> np.ndarray:
    """Per window of an axis: its positions inside the padded input (``include_pad``) or
    inside the input itself; the ceil-mode overhang never counts."""
    start = np.arange(out, dtype=np.int64) * s - p
    end = np.minimum(start + k, n + p)
    if include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)


def avg_divisors(
    x_shape: tuple[int, ...],
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    out: Pair,
    count_include_pad: bool,
    divisor_override: int | None,
    dtype: np.dtype,
) -> np.ndarray | float:
    """What each window's sum is divided by: a number when every window has the same divisor,
    else an (Ho, Wo) array."""
    if divisor_override is not None:
        return float(divisor_override)
    if count_include_pad and all(
        (out[i] - 1) * stride[i] + kernel[i] <= x_shape[2 + i] + 2 * padding[i] for i in range(2)
    ):
        return float(kernel[0] * kernel[1])  # every window inside the padded input
    rows, cols = (
        _axis_divisors(x_shape[2 + i], kernel[i], stride[i], padding[i], out[i], count_include_pad)
        for i in range(2)
    )
    if (rows == rows[0]).all() and (cols == cols[0]).all():
        return float(rows[0] * cols[0])
    return np.multiply.outer(rows, cols).astype(dtype)
