"""conv2d's weight gradient for few taps (C * kh * kw <= 32: first layers), one product per image.

dW = sum_n g_n @ cols_n^T, with g_n = g[n] (O, Ho*Wo) as it lies in memory and cols_n the
(C*kh*kw, Ho*Wo) windows of image n, copied a cache-sized chunk of images at a time from a
strided view of the padded x. The im2col kernels instead transpose the whole gradient to (O,
N*Ho*Wo) rows and build the columns of the batch for one long product; with few taps that
transpose and the product's thin (C*kh*kw) side cost more than the arithmetic. The per-image
products (O, C*kh*kw) are kept and summed over the batch at the end (one reduction), so the
result does not depend on the chunks or the thread count, and no junk columns meet a
non-finite x.

At two threads of a 2-core AVX-512 VM, against the kernels before (MLAS's products of im2col
chunks, ORT's swapped-axes conv): the CNN's 1 -> 32 3x3 at 28x28 0.91 -> 0.38 ms, LeNet's
1 -> 6 5x5 0.61 -> 0.41, ResNet's 3 -> 16 3x3 0.67 -> 0.43, DCGAN's 1 -> 32 4x4 stride 2 0.36
-> 0.23; from 75 taps (3 -> 32 5x5) it was 1.35x slower, from 144 1.3-1.7x slower.
"""

from __future__ import annotations

import numpy as np

from .conv_chunks import by_images
from .im2col import Pair

_MAX_TAPS = 32  # C * kh * kw up to which one product per image wins
_CHUNK_BYTES = 1 << 20  # the windows of a chunk of images: 1 MiB (256 K and 4 M ran no faster)


def takes(x_shape: tuple[int, ...], kernel: Pair, groups: int) -> bool:
    """Whether this kernel computes the weight gradient of a conv of x ``x_shape`` (N, C, H, W):
    one group of at most ``_MAX_TAPS`` taps."""
    return groups == 1 and x_shape[1] * kernel[0] * kernel[1] <= _MAX_TAPS


def weight_grad(
    grad: np.ndarray,
    x: np.ndarray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int = 1,
) -> np.ndarray | None:
    """conv2d's weight gradient: grad (N, O, Ho, Wo), x (N, C, H, W) -> (O, C, kh, kw), or
    None where ``takes`` declines. ``grad`` may stop short of the last windows (a transposed
    conv's x whose output padding made more windows than it has rows): those count as zero."""
    if not takes(x.shape, kernel, groups):
        return None
    n, c, h, w = x.shape
    kh, kw = kernel
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    o = grad.shape[1]
    dtype = np.result_type(grad, x)
    if n == 0 or ho <= 0 or wo <= 0:
        return np.zeros((o, c, kh, kw), dtype=dtype)
    g = grad
    if g.shape[2:] != (ho, wo):
        g = np.pad(g, ((0, 0), (0, 0), (0, ho - g.shape[2]), (0, wo - g.shape[3])))
    taps, length = c * kh * kw, ho * wo
    rows = np.ascontiguousarray(g, dtype=dtype).reshape(n, o, length)
    xp = np.pad(x.astype(dtype, copy=False), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    s = xp.strides
    windows = np.lib.stride_tricks.as_strided(
        xp,
        (n, c, kh, kw, ho, wo),
        (s[0], s[1], dh * s[2], dw * s[3], sh * s[2], sw * s[3]),
        writeable=False,
    )
    per_image = np.empty((n, o, taps), dtype=dtype)
    per = max(1, _CHUNK_BYTES // max(taps * length * dtype.itemsize, 1))

    def run(lo: int, hi: int) -> None:
        for a in range(lo, hi, per):
            b = min(hi, a + per)
            cols = np.ascontiguousarray(windows[a:b]).reshape(b - a, taps, length)
            np.matmul(rows[a:b], cols.transpose(0, 2, 1), out=per_image[a:b])

    by_images(n, n * o * taps * length, run)
    return per_image.sum(axis=0).reshape(o, c, kh, kw)
