"""Padding, resizing and pixel shuffles of ``em.nn.functional``, with PyTorch's arguments.

All are compositions of layout and index rows (``cat``, ``narrow``, ``select``, products with
constant weights), so they are differentiable (twice, too) with no rule of their own. Index
and weight tables are built on the host from shapes alone, never from values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from .losses import _tensor

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _ints(op: str, name: str, v: object) -> tuple[int, ...]:
    if not isinstance(v, Sequence) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in v
    ):
        raise DTypeError(f"{op}: expected {name} as a tuple of ints, got {v!r}.")
    return tuple(v)


def _indices(x: Tensor, idx: np.ndarray) -> Tensor:
    return Tensor.from_data(idx.astype(np.int64), device=x.device.without_autodiff())


def _pad_indices(mode: str, n: int, lo: int, hi: int) -> np.ndarray:
    core = np.arange(n)
    if mode == "replicate":
        return np.concatenate([np.zeros(lo, np.int64), core, np.full(hi, n - 1)])
    if mode == "circular":
        return np.concatenate([np.arange(n - lo, n), core, np.arange(hi)])
    return np.concatenate([np.arange(lo, 0, -1), core, np.arange(n - 2, n - 2 - hi, -1)])


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)``, last dim
    first, as PyTorch. ``mode``: ``"constant"`` (``value``; negative widths crop), ``"reflect"``
    (mirror without the edge; widths < the dim's size), ``"replicate"`` (repeat the edge),
    ``"circular"`` (wrap around; widths <= the dim's size).

    Example:
        >>> pad(em.tensor([[1.0, 2.0]]), (1, 2)).tolist()
        [[0.0, 1.0, 2.0, 0.0, 0.0]]
    """
    x = _tensor("pad", x)
    widths = _ints("pad", "pad", pad)
    if len(widths) % 2 or len(widths) // 2 > x.ndim:
        raise ShapeError(
            f"pad: expected an even number of widths, at most 2 per dim ({2 * x.ndim} for shape "
            f"{x.shape}), got {len(widths)}."
        )
    if mode not in _PAD_MODES:
        raise ShapeError(f"pad: expected mode in {_PAD_MODES}, got {mode!r}.")
    if mode != "constant" and any(w < 0 for w in widths):
        raise ShapeError(f"pad: mode {mode!r} takes widths >= 0, got {widths}.")
    out = x
    for k in range(len(widths) // 2):
        dim = x.ndim - 1 - k
        lo, hi = widths[2 * k], widths[2 * k + 1]
        n = out.shape[dim]
        if mode == "constant":
            out = _pad_constant(out, dim, lo, hi, value)
            continue
        limit = n - 1 if mode == "reflect" else n
        if mode != "replicate" and (lo > limit or hi > limit):
            raise ShapeError(
                f"pad: mode {mode!r} needs widths <= {limit} for dim {dim} of size {n}, got "
                f"({lo}, {hi})."
            )
        if n == 0:
            raise ShapeError(f"pad: mode {mode!r} cannot pad dim {dim} of size 0.")
        if lo or hi:
            out = out.select(dim, _indices(out, _pad_indices(mode, n, lo, hi)))
    return out


def _pad_constant(x: Tensor, dim: int, lo: int, hi: int, value: float) -> Tensor:
    n = x.shape[dim]
    if lo < 0 or hi < 0:  # negative widths crop
        start, stop = max(-lo, 0), n - max(-hi, 0)
        if stop < start:
            raise ShapeError(f"pad: cropping ({lo}, {hi}) leaves nothing of dim {dim} (size {n}).")
        x = x.narrow(dim, start, stop - start)
        lo, hi = max(lo, 0), max(hi, 0)
    if not lo and not hi:
        return x

    def block(w: int) -> Tensor:
        shape = x.shape[:dim] + (w,) + x.shape[dim + 1 :]
        return Tensor.full(shape, value, device=x.device, dtype=x.dtype)

    parts = ([block(lo)] if lo else []) + [x] + ([block(hi)] if hi else [])
    return Tensor.cat(parts, dim)


def _out_sizes(
    op: str, x: Tensor, size: object, scale_factor: object, spatial: int
) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
    if (size is None) == (scale_factor is None):
        raise ShapeError(f"{op}: expected exactly one of size and scale_factor.")
    ins = x.shape[-spatial:]
    if size is not None:
        sizes = (size,) * spatial if isinstance(size, int) else _ints(op, "size", size)
        if len(sizes) != spatial or any(s <= 0 for s in sizes):
            raise ShapeError(f"{op}: expected {spatial} positive sizes, got {size!r}.")
        return tuple(sizes), (None,) * spatial
    f = scale_factor
    factors = (f,) * spatial if isinstance(f, (int, float)) else tuple(f)  # type: ignore[arg-type]
    if len(factors) != spatial or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in factors
    ):
        raise ShapeError(f"{op}: expected {spatial} positive scale factors, got {f!r}.")
    return tuple(math.floor(n * v) for n, v in zip(ins, factors)), tuple(map(float, factors))


def _resize_dim(
    x: Tensor, dim: int, out: int, factor: float | None, mode: str, align: bool
) -> Tensor:
    n = x.shape[dim]
    if mode == "nearest":
        step = np.float32(1.0 / factor if factor is not None else n / out)  # as PyTorch: float32
        src = np.minimum(np.floor(np.arange(out, dtype=np.float32) * step), n - 1)
        return x.select(dim, _indices(x, src.astype(np.int64)))
    if align:
        pos = np.arange(out) * ((n - 1) / (out - 1)) if out > 1 else np.zeros(out)
    else:
        scale = 1.0 / factor if factor is not None else n / out
        pos = np.maximum((np.arange(out) + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(np.floor(pos).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    w1 = pos - i0
    shape = [1] * x.ndim
    shape[dim] = out
    dev = x.device.without_autodiff()
    w1t = Tensor.from_data(w1.reshape(shape), device=dev, dtype=x.dtype)
    w0t = Tensor.from_data((1.0 - w1).reshape(shape), device=dev, dtype=x.dtype)
    return x.select(dim, _indices(x, i0)) * w0t + x.select(dim, _indices(x, i1)) * w1t


def interpolate(
    x: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """Resize the spatial dims of ``x`` (N, C, *spatial) as PyTorch's ``interpolate``.

    ``mode="nearest"`` (1-3 spatial dims) or ``"bilinear"`` (2 spatial dims; ``"linear"`` for 1),
    ``align_corners`` for the linear modes only (default False). With ``scale_factor``, the
    source positions use the factor itself, as PyTorch does without
    ``recompute_scale_factor``.

    Example:
        >>> interpolate(em.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
        [[[1.0, 1.0, 2.0, 2.0]]]
    """
    x = _tensor("interpolate", x)
    spatial = x.ndim - 2
    modes = {"nearest": (1, 2, 3), "linear": (1,), "bilinear": (2,)}
    if mode not in modes:
        raise ShapeError(f"interpolate: expected mode in {tuple(modes)}, got {mode!r}.")
    if spatial not in modes[mode]:
        raise ShapeError(
            f"interpolate: mode {mode!r} takes inputs of rank {[d + 2 for d in modes[mode]]} "
            f"(N, C, *spatial), got shape {x.shape}."
        )
    if mode == "nearest" and align_corners is not None:
        raise ShapeError("interpolate: align_corners applies to the linear modes only.")
    if not x.dtype.is_float and mode != "nearest":
        raise DTypeError(f"interpolate: mode {mode!r} needs a float input, got {x.dtype.name}.")
    sizes, factors = _out_sizes("interpolate", x, size, scale_factor, spatial)
    out = x
    for k in range(spatial):
        dim = 2 + k
        out = _resize_dim(out, dim, sizes[k], factors[k], mode, bool(align_corners))
    return out


def pixel_shuffle(x: Tensor, upscale_factor: int) -> Tensor:
    """(*, C·r², H, W) -> (*, C, H·r, W·r), as PyTorch's ``pixel_shuffle``."""
    x = _tensor("pixel_shuffle", x)
    r = _factor("pixel_shuffle", upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise ShapeError(
            f"pixel_shuffle: expected (*, C*{r * r}, H, W), got shape {x.shape}; the channels "
            f"must divide by upscale_factor**2 = {r * r}."
        )
    *lead, c, h, w = x.shape
    b = len(lead)
    y = x.reshape((*lead, c // (r * r), r, r, h, w))
    order = [*range(b), b, b + 3, b + 1, b + 4, b + 2]
    return y.permute(order).reshape((*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(x: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H·r, W·r) -> (*, C·r², H, W), the inverse of ``pixel_shuffle``."""
    x = _tensor("pixel_unshuffle", x)
    r = _factor("pixel_unshuffle", downscale_factor)
    if x.ndim < 3 or x.shape[-1] % r or x.shape[-2] % r:
        raise ShapeError(
            f"pixel_unshuffle: expected (*, C, H, W) with H and W divisible by {r}, got shape "
            f"{x.shape}."
        )
    *lead, c, h, w = x.shape
    b = len(lead)
    y = x.reshape((*lead, c, h // r, r, w // r, r))
    order = [*range(b), b, b + 2, b + 4, b + 1, b + 3]
    return y.permute(order).reshape((*lead, c * r * r, h // r, w // r))


def _factor(op: str, r: object) -> int:
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise DTypeError(f"{op}: expected a positive int factor, got {r!r}.")
    return r
