"""The im2col geometry of a NumPy 2-d convolution.

Columns use the layout (C*kh*kw, N*Ho*Wo). Flat columns (stride 1, see ``_Geometry``) are
filled by one copy of an ``as_strided`` view whose innermost runs are Ho*Wp long (one NumPy call,
not one per tap: the GIL stays free for the other pool threads); exact columns by one strided
slice copy per kernel tap (a window view's innermost runs would be only kw long). Input gradients
scatter the columns back with one strided add per tap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .threads import _parallel_split

Pair = tuple[int, int]


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _pad(x: np.ndarray, padding: Pair, value: float = 0.0) -> np.ndarray:
    ph, pw = padding
    if not ph and not pw:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _all_finite(a: np.ndarray) -> bool:
    """Whether ``a`` holds no NaN or +-inf, from one sum (no temporary): a sum that overflows
    answers False too, which only costs the caller its non-finite path."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.add.reduce(a, axis=None)))


def _as_forward(weight: np.ndarray, groups: int) -> np.ndarray:
    """(O, Cg, kh, kw) -> (C, O/G, kh, kw), flipped: the weight of the stride-1 convolution
    of the output gradient that gives the input gradient (a strided view; the kernels that
    take it make it contiguous where they need to)."""
    o, cg, kh, kw = weight.shape
    w = weight.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)
    return w.reshape(groups * cg, o // groups, kh, kw)[:, :, ::-1, ::-1]


def _tap(i: int, j: int, stride: Pair, dilation: Pair, out: Pair) -> tuple[slice, slice]:
    """The (rows, cols) slices of the padded input that kernel tap (i, j) reads."""
    r0, c0 = i * dilation[0], j * dilation[1]
    return (
        slice(r0, r0 + stride[0] * (out[0] - 1) + 1, stride[0]),
        slice(c0, c0 + stride[1] * (out[1] - 1) + 1, stride[1]),
    )


class _Geometry:
    """Where each output position's column lives, for one convolution.

    With stride 1 and a kernel narrow next to the image, the columns use the padded input's full
    width (``width = Wp``): output position (ho, wo) is column ho * Wp + wo, so kernel tap (i, j)
    reads one contiguous run of Ho * Wp values per (channel, image) at offset i*dh*Wp + j*dw of
    the flattened image. The wo >= Wo columns are junk: computed and dropped in outputs, zero in
    gradients. Where a product sums over them and an operand is non-finite they are zeroed
    (``zero_junk``), so that an inf never reaches an output it does not feed (0 * inf is NaN);
    the callers decide from a small operand or result, and finite ones leave them as they are.
    Otherwise the columns are exact (Ho, Wo)
    positions filled with strided slices (``width = Wo``).
    """

    __slots__ = ("dilation", "flat", "kernel", "out", "padding", "shape", "stride", "width")

    def __init__(
        self, shape: tuple[int, ...], kernel: Pair, stride: Pair, padding: Pair, dilation: Pair
    ) -> None:
        self.shape = shape  # the input's (N, C, H, W)
        self.kernel, self.stride, self.padding, self.dilation = kernel, stride, padding, dilation
        h, w = shape[2], shape[3]
        self.out = (
            _conv_out(h, kernel[0], stride[0], padding[0], dilation[0]),
            _conv_out(w, kernel[1], stride[1], padding[1], dilation[1]),
        )
        # junk columns cost matrix-product work; the contiguous copies win (measured on LeNet's
        # 14 -> 10 layer) while they at most double the columns
        wp = w + 2 * padding[1]
        self.flat = stride == (1, 1) and wp <= 2 * self.out[1]
        self.width = wp if self.flat else self.out[1]

    @property
    def has_junk(self) -> bool:
        """Whether the columns hold junk (flat columns wider than the output)."""
        return self.width > self.out[1]

    @property
    def columns(self) -> int:  # columns per image
        return self.out[0] * self.width

    def taps(self) -> list[tuple[int, int, Any]]:
        """(i, j, where) per tap: a flat offset, or (rows, cols) slices of the padded input."""
        kh, kw = self.kernel
        dh, dw = self.dilation
        if self.flat:
            return [(i, j, i * dh * self.width + j * dw) for i in range(kh) for j in range(kw)]
        return [
            (i, j, _tap(i, j, self.stride, self.dilation, self.out))
            for i in range(kh)
            for j in range(kw)
        ]

    def flat_zeros(self, dtype: np.dtype) -> np.ndarray:
        """Zeros (C, N, Hp*Wp + tail): channels-first flattened padded images, with a zero tail
        that the last taps' junk columns may reach."""
        n, c, h, w = self.shape
        hp, wp = h + 2 * self.padding[0], w + 2 * self.padding[1]
        tail = (self.kernel[1] - 1) * self.dilation[1]
        return np.zeros((c, n, hp * wp + tail), dtype=dtype)

    def padded_flat(self, x: np.ndarray) -> np.ndarray:
        """x (N, C, H, W) written into ``flat_zeros``."""
        n, c, h, w = self.shape
        ph, pw = self.padding
        buf = self.flat_zeros(x.dtype)
        view = buf[:, :, : (h + 2 * ph) * (w + 2 * pw)].reshape(c, n, h + 2 * ph, w + 2 * pw)
        view[:, :, ph : ph + h, pw : pw + w] = x.transpose(1, 0, 2, 3)
        return buf

    def im2col(self, x: np.ndarray, groups: int, zero_junk: bool = False) -> np.ndarray:
        """Columns (G, Cg*kh*kw, N*columns) of x (N, C, H, W); with ``zero_junk`` the junk
        columns hold zeros instead of the values they wrap around to (for a product that sums
        over the columns)."""
        n, c = self.shape[:2]
        kh, kw = self.kernel
        if self.flat:
            src = self.padded_flat(x)
            cols = np.empty((c, kh, kw, n, self.columns), dtype=x.dtype)
            junk = self._junk(cols) if zero_junk and self.has_junk else None
            # every tap's run at once: tap (i, j) starts i*dh*Wp + j*dw into each flat image, so
            # the taps are two more strides over ``src``; one copy of Ho*Wp-long runs (one NumPy
            # call, which keeps the GIL free for the other pool threads)
            sc, sn, se = src.strides
            windows = np.lib.stride_tricks.as_strided(
                src,
                (c, kh, kw, n, self.columns),
                (sc, self.dilation[0] * self.width * se, self.dilation[1] * se, sn, se),
                writeable=False,
            )

            def fill(lo: int, hi: int) -> None:
                cols[:, :, :, lo:hi] = windows[:, :, :, lo:hi]
                if junk is not None:
                    junk[:, :, :, lo:hi] = 0

        else:
            # channels first, so that each tap fills a (C, N, Ho, Wo) slab
            taps = self.taps()
            xt = _pad(x, self.padding).transpose(1, 0, 2, 3)
            cols = np.empty((c, kh, kw, n, self.out[0], self.out[1]), dtype=x.dtype)

            def fill(lo: int, hi: int) -> None:
                for i, j, (rs, cs) in taps:
                    cols[:, i, j, lo:hi] = xt[:, lo:hi, rs, cs]

        # the images are split between threads; each copies every tap of its share
        _parallel_split(n, cols.size, fill, blas=False)
        return cols.reshape(groups, (c // groups) * kh * kw, n * self.columns)

    def _junk(self, cols: np.ndarray) -> np.ndarray:
        """The junk columns of flat columns (C, kh, kw, N, Ho*Wp): a (C, kh, kw, N, Ho, Wp - Wo)
        view."""
        return cols.reshape(*cols.shape[:4], self.out[0], self.width)[..., self.out[1] :]

    def col2im(
        self, dcols: np.ndarray, zero_junk: bool = False, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Adjoint of ``im2col``: sum (G, Cg*kh*kw, N*columns) columns into (N, C, H, W)
        (written into ``out`` when given, which saves one copy).

        With ``zero_junk`` the junk columns of ``dcols`` (a fresh product, C-contiguous) are
        overwritten with zeros first: they may hold NaN from 0 * inf."""
        n, c, h, w = self.shape
        kh, kw = self.kernel
        ph, pw = self.padding
        hp, wp = h + 2 * ph, w + 2 * pw
        taps = self.taps()
        if self.flat:
            d = dcols.reshape(c, kh, kw, n, self.columns)
            acc = self.flat_zeros(dcols.dtype)
            length = self.columns

            junk = self._junk(d) if zero_junk and self.has_junk else None

            def add(lo: int, hi: int) -> None:
                if junk is not None:  # they feed no input
                    junk[:, :, :, lo:hi] = 0
                for i, j, off in taps:
                    acc[:, lo:hi, off : off + length] += d[:, i, j, lo:hi]

            _parallel_split(n, d.size, add, blas=False)
            full = acc[:, :, : hp * wp].reshape(c, n, hp, wp)
        else:
            d = dcols.reshape(c, kh, kw, n, self.out[0], self.out[1])
            full = np.zeros((c, n, hp, wp), dtype=dcols.dtype)

            def add_taps(lo: int, hi: int) -> None:
                for i, j, (rs, cs) in taps:
                    full[:, lo:hi, rs, cs] += d[:, i, j, lo:hi]

            _parallel_split(n, d.size, add_taps, blas=False)
        # (C, N, Hp, Wp) -> (N, C, H, W)
        inner = full[:, :, ph : ph + h, pw : pw + w].transpose(1, 0, 2, 3)
        if out is None:
            return np.ascontiguousarray(inner)
        out[...] = inner
        return out

    def rows(self, y: np.ndarray, groups: int) -> np.ndarray:
        """(N, O, Ho, Wo) -> (G, O/G, N*columns), channels as matrix rows; junk columns zero."""
        n, o = y.shape[:2]
        yt = y.transpose(1, 0, 2, 3)
        if self.width == self.out[1]:
            m = np.ascontiguousarray(yt)
        else:
            m = np.zeros((o, n, self.out[0], self.width), dtype=y.dtype)
            m[..., : self.out[1]] = yt
        return m.reshape(groups, o // groups, -1)

    def unrows_into(self, m: np.ndarray, out: np.ndarray) -> None:
        """``unrows(m)`` written into ``out`` (N, O, Ho, Wo) (one copy, no new array)."""
        o = m.shape[0] * m.shape[1]
        t = m.reshape(o, self.shape[0], self.out[0], self.width)[..., : self.out[1]]
        out[...] = t.transpose(1, 0, 2, 3)

    def unrows(self, m: np.ndarray) -> np.ndarray:
        """(G, O/G, N*columns) -> (N, O, Ho, Wo), contiguous, junk columns dropped."""
        o = m.shape[0] * m.shape[1]
        t = m.reshape(o, self.shape[0], self.out[0], self.width)[..., : self.out[1]]
        return np.ascontiguousarray(t.transpose(1, 0, 2, 3))
