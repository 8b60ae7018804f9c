"""Image-chunked 2-d convolution kernels: im2col, product and scatter per cache-sized chunk.

The whole-batch kernels of ``conv.py`` write every image's columns (kh*kw times the input) to
memory and read them back for the product. Here each pool thread takes a share of the images and
works through it a few images at a time: the chunk's columns (about ``_CHUNK_BYTES``) are built,
multiplied and dropped while they are still in cache, and one scratch buffer serves every chunk.
Weight gradients are summed per thread and added at the end. Images are independent, so the
results equal the whole-batch kernels' up to the order of the weight gradient's float sums.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .blas import serial
from .im2col import _Geometry
from .threads import _PARALLEL_MIN, _in_share, _share, _submit, num_threads

# columns per chunk: 4 MiB. Each chunk costs a few NumPy calls, and two threads' calls meet at
# the GIL: ResNet's 32x32 weight gradients at two threads 3.2 -> 2.1 ms from 2 MiB chunks
_CHUNK_BYTES = 1 << 22


def _images_per_chunk(geo: _Geometry, channels: int, itemsize: int) -> int:
    """Images whose columns fill about ``_CHUNK_BYTES`` (at least one)."""
    per_image = channels * geo.kernel[0] * geo.kernel[1] * geo.columns * itemsize
    return max(1, _CHUNK_BYTES // max(per_image, 1))


def chunked(n: int, work: int) -> bool:
    """Whether a batch of ``n`` images (``work`` elements in all) takes the chunked kernels:
    every thread gets at least one image (smaller batches split their columns instead)."""
    return n >= num_threads() or work < _PARALLEL_MIN


def by_images(n: int, work: int, fn: Callable[[int, int], None]) -> None:
    """Call ``fn(lo, hi)`` on one contiguous share of the ``n`` images per pool thread; inside
    ``fn`` the kernels stay serial (no nested splitting) and BLAS runs one thread."""
    threads = min(num_threads(), n)
    if threads <= 1 or work < _PARALLEL_MIN or _in_share():
        _share(fn, 0, n)
        return
    per = -(-n // threads)
    with serial():
        futures = [_submit(_share, fn, lo, min(lo + per, n)) for lo in range(per, n, per)]
        _share(fn, 0, per)
        for f in futures:
            f.result()


class Chunks:
    """The geometry of each chunk size of one convolution (the last chunk may be shorter)."""

    __slots__ = ("_geos", "dilation", "kernel", "padding", "per", "shape", "stride")

    def __init__(
        self,
        shape: tuple[int, ...],
        kernel: tuple[int, int],
        stride: tuple[int, int],
        padding: tuple[int, int],
        dilation: tuple[int, int],
        itemsize: int,
    ) -> None:
        self.shape, self.kernel, self.stride = shape, kernel, stride
        self.padding, self.dilation = padding, dilation
        self._geos: dict[int, _Geometry] = {}
        self.per = _images_per_chunk(self.geo(1), shape[1], itemsize)

    def geo(self, n: int) -> _Geometry:
        """The geometry of a chunk of ``n`` images."""
        g = self._geos.get(n)
        if g is None:
            shape = (n, *self.shape[1:])
            g = _Geometry(shape, self.kernel, self.stride, self.padding, self.dilation)
            self._geos[n] = g
        return g

    def each(self, lo: int, hi: int) -> list[tuple[int, int, _Geometry]]:
        """(start, stop, geometry) of the chunks of images ``lo:hi``."""
        out = []
        for s in range(lo, hi, self.per):
            e = min(s + self.per, hi)
            out.append((s, e, self.geo(e - s)))
        return out


def sum_parts(parts: dict[int, np.ndarray]) -> np.ndarray:
    """The per-share partial sums (keyed by each share's start) added in share order, whichever
    thread finished first, so the bits do not depend on the threads' timing (in place in the
    first share's array)."""
    keys = sorted(parts)
    out = parts[keys[0]]
    for k in keys[1:]:
        out += parts[k]
    return out
