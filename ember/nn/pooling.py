"""Pooling of ``em.nn.functional``, with PyTorch's arguments: max and average pooling in 1-d and
2-d, max unpooling, adaptive average pooling.

Windows follow PyTorch. Along an axis of size ``n`` the output has
``floor((n + 2 p - d (k - 1) - 1) / s) + 1`` windows, or with ``ceil_mode=True`` that division
rounded up, the last window dropped when it would start in the right padding (so a window
always starts inside the input or its left padding; it may run past the padding, whose
overhang counts as -inf for max and is left out of every divisor). Padding is at most half the
kernel. The 1-d functions run the 2-d rows on a height-1 image, so their indices are
positions along L.

Example:
    >>> import ember as em
    >>> from ember.nn import functional as F
    >>> x = em.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]])
    >>> F.max_pool1d(x, 2, ceil_mode=True).tolist()
    [[[3.0, 5.0, 4.0]]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from .._core import checks
from .._core.dispatch import apply
from .._core.tensor import Tensor
from ..dtype import int64
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from ..ops.conv import pool_output_size
from .losses import _index_range
from .spatial_args import IntOrPair, Pair, _batched, _pair

_MAX, _INDICES, _AVG = OPS["max_pool2d"], OPS["max_pool2d_indices"], OPS["avg_pool2d"]
_UNPOOL = OPS["max_unpool2d"]
_LAYOUT = {1: "(N, C, L)", 2: "(N, C, H, W)"}


# ---------------------------------------------------------------- arguments
def _flag(op: str, name: str, v: Any) -> bool:
    if type(v) is bool or isinstance(v, np.bool_):
        return bool(v)
    raise DTypeError(f"{op}: expected {name} to be a bool, got {checks.show(v)}. Pass True/False.")


def _geo(op: str, name: str, v: Any, minimum: int, n: int) -> Pair:
    """A 2-d geometry argument: a pair for 2-d ops, ``(fill, v)`` for 1-d ones (an int or a
    1-tuple; ``fill`` 1 for sizes, 0 for padding)."""
    if n == 2:
        return _pair(op, name, v, minimum)
    if type(v) is tuple or type(v) is list:
        if len(v) != 1:
            raise ShapeError(
                f"{op}: expected {name} to be an int or a 1-tuple, got {checks.show(v)}."
            )
        v = v[0]
    return (min(minimum, 1), _pair(op, name, v, minimum)[0])


def _stride(op: str, stride: Any, kernel: Pair, n: int) -> Pair:
    """``stride``, defaulting to the kernel size (None or an empty tuple, as PyTorch)."""
    if stride is None or ((type(stride) is tuple or type(stride) is list) and not stride):
        return kernel
    return _geo(op, "stride", stride, 1, n)


def _shown(v: Pair, n: int) -> Any:
    return v if n == 2 else v[1]


def _windows(
    op: str, x: Tensor, k: Pair, st: Pair, pad: Pair, dil: Pair, ceil_mode: bool, n: int
) -> None:
    """Refuse padding over half the kernel, and an input too small for one window."""
    if pad[0] > k[0] // 2 or pad[1] > k[1] // 2:
        raise ShapeError(
            f"{op}: expected padding at most half the kernel size {_shown(k, n)}, got padding "
            f"{_shown(pad, n)}. Use less padding or a larger kernel."
        )
    size = (x.shape[2], x.shape[3])
    out = tuple(pool_output_size(size[i], k[i], st[i], pad[i], dil[i], ceil_mode) for i in (0, 1))
    if min(out) < 1:
        hint = "" if ceil_mode else ", or ceil_mode=True"
        raise ShapeError(
            f"{op}: expected an input of at least one window, got spatial size "
            f"{_shown(size, n)} for kernel {_shown(k, n)} (stride {_shown(st, n)}, padding "
            f"{_shown(pad, n)}, dilation {_shown(dil, n)}). Use a smaller kernel or more "
            f"padding{hint}."
        )
    for i in (0, 1):
        if dil[i] > 1 and not _windows_see_input(size[i], k[i], st[i], pad[i], dil[i], out[i]):
            raise ShapeError(
                f"{op}: expected every window to read some of the input, got one that reads "
                f"only padding (kernel {_shown(k, n)}, dilation {_shown(dil, n)}, stride "
                f"{_shown(st, n)}, padding {_shown(pad, n)}, spatial size {_shown(size, n)}). "
                "Use less padding or dilation."
            )
    checks.alloc(op, (x.shape[0], x.shape[1], *out), x.dtype)


def _windows_see_input(n: int, k: int, s: int, p: int, d: int, out: int) -> bool:
    """Whether every dilated window along an axis has a tap inside the input (PyTorch gives
    -inf for one that has none, and its CPU backward then writes out of bounds)."""
    start = np.arange(out, dtype=np.int64) * s - p
    first = np.maximum(-start + d - 1, 0) // d  # the first tap at or after position 0
    return bool(np.all((first < k) & (start + first * d < n)))


def _spatial(op: str, x: Any, n: int) -> tuple[Tensor, bool]:
    """``x`` as (N, C, H, W) (a 1-d input as height 1), and whether a batch dim was added."""
    x, unbatched = _batched(op, x, n, _LAYOUT[n])
    return (x if n == 2 else x.unsqueeze_dim(2)), unbatched


def _back(y: Tensor, n: int, unbatched: bool) -> Tensor:
    """A row's (N, C, H, W) result in the input's layout."""
    if n == 1:
        y = y.squeeze_dim(2)
    return y.squeeze_dim(0) if unbatched else y


# ---------------------------------------------------------------- max pooling
def _max_pool(
    op: str,
    x: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: Any,
    return_indices: Any,
    n: int,
) -> Tensor | tuple[Tensor, Tensor]:
    x, unbatched = _spatial(op, x, n)
    k = _geo(op, "kernel_size", kernel_size, 1, n)
    st = _stride(op, stride, k, n)
    pad = _geo(op, "padding", padding, 0, n)
    dil = _geo(op, "dilation", dilation, 1, n)
    ceil = _flag(op, "ceil_mode", ceil_mode)
    with_indices = _flag(op, "return_indices", return_indices)
    _windows(op, x, k, st, pad, dil, ceil, n)
    attrs = {"kernel_size": k, "stride": st, "padding": pad, "dilation": dil, "ceil_mode": ceil}
    out = _back(apply(_MAX, (x,), attrs), n, unbatched)
    if not with_indices:
        return out
    return out, _back(apply(_INDICES, (x,), attrs), n, unbatched)


@overload
def max_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = ...,
    padding: IntOrPair = ...,
    dilation: IntOrPair = ...,
    ceil_mode: bool = ...,
    return_indices: Literal[False] = ...,
) -> Tensor: ...
@overload
def max_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = ...,
    padding: IntOrPair = ...,
    dilation: IntOrPair = ...,
    ceil_mode: bool = ...,
    *,
    return_indices: Literal[True],
) -> tuple[Tensor, Tensor]: ...
def max_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Maximum over each (kh, kw) window; stride defaults to the kernel size.

    Args:
        x: (N, C, H, W) or (C, H, W).
        padding: Implicit -inf padding, at most half the kernel.
        ceil_mode: Round the output size up (module docstring: the last window starts inside
            the input or its left padding).
        return_indices: Also return where each maximum is: int64, the flat index into the
            (H, W) plane of its (n, c) (as PyTorch), untracked; ``max_unpool2d`` takes it.

    Returns:
        (N, C, Ho, Wo), and the (N, C, Ho, Wo) indices when asked. The gradient of each output
        goes to the first maximum of its window. A dilation that leaves a window reading only
        padding is refused (PyTorch gives -inf there).
    """
    return _max_pool(
        "max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2
    )


@overload
def max_pool1d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = ...,
    padding: int | Sequence[int] = ...,
    dilation: int | Sequence[int] = ...,
    ceil_mode: bool = ...,
    return_indices: Literal[False] = ...,
) -> Tensor: ...
@overload
def max_pool1d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = ...,
    padding: int | Sequence[int] = ...,
    dilation: int | Sequence[int] = ...,
    ceil_mode: bool = ...,
    *,
    return_indices: Literal[True],
) -> tuple[Tensor, Tensor]: ...
def max_pool1d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Maximum over each window of length ``kernel_size``: (N, C, L) or (C, L) -> (.., Lo).

    As ``max_pool2d`` on a height-1 image; indices are positions along L.
    """
    return _max_pool(
        "max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1
    )


# ---------------------------------------------------------------- average pooling
def _divisor(op: str, v: Any) -> int | None:
    if v is None:
        return None
    if type(v) is bool or not isinstance(v, (int, np.integer)):
        raise DTypeError(f"{op}: expected divisor_override to be None or an int, got {v!r}.")
    if v == 0:
        raise ShapeError(
            f"{op}: expected a nonzero divisor_override, got 0. Pass None to divide by the "
            "window size."
        )
    return int(v)


def _avg_pool(
    op: str,
    x: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: Any,
    count_include_pad: Any,
    divisor_override: Any,
    n: int,
) -> Tensor:
    x, unbatched = _spatial(op, x, n)
    k = _geo(op, "kernel_size", kernel_size, 1, n)
    st = _stride(op, stride, k, n)
    pad = _geo(op, "padding", padding, 0, n)
    ceil = _flag(op, "ceil_mode", ceil_mode)
    attrs = {
        "kernel_size": k,
        "stride": st,
        "padding": pad,
        "ceil_mode": ceil,
        "count_include_pad": _flag(op, "count_include_pad", count_include_pad),
        "divisor_override": _divisor(op, divisor_override),
    }
    _windows(op, x, k, st, pad, (1, 1), ceil, n)
    return _back(apply(_AVG, (x,), attrs), n, unbatched)


def avg_pool2d(
    x: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over each (kh, kw) window: its sum over a divisor.

    Args:
        x: (N, C, H, W) or (C, H, W).
        padding: Implicit zero padding, at most half the kernel.
        ceil_mode: Round the output size up (see the module docstring).
        count_include_pad: Divide by the window's positions inside the padded input (True, as
            PyTorch), else by those inside the input. The ceil-mode overhang never counts.
        divisor_override: A nonzero int every window's sum is divided by instead.

    Returns:
        (N, C, Ho, Wo).
    """
    return _avg_pool(
        "avg_pool2d",
        x,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
        2,
    )


def avg_pool1d(
    x: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over each window of length ``kernel_size``: (N, C, L) or (C, L) -> (.., Lo).

    As ``avg_pool2d`` on a height-1 image (PyTorch's avg_pool1d has no divisor_override).
    """
    return _avg_pool(
        "avg_pool1d", x, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1
    )


# ---------------------------------------------------------------- max unpooling
def _unpool_size(
    op: str, size: Pair, k: Pair, st: Pair, pad: Pair, output_size: Any, n: int
) -> Pair:
    """The unpooled (H, W): PyTorch's default ``(in - 1) s - 2 p + k``, or ``output_size``
    (its last n entries when it also names N and C), within a stride of that default."""
    default = ((size[0] - 1) * st[0] - 2 * pad[0] + k[0], (size[1] - 1) * st[1] - 2 * pad[1] + k[1])
    if output_size is None:
        want: tuple[Any, ...] = default
    else:
        if isinstance(output_size, int) or not isinstance(output_size, (Sequence, np.ndarray)):
            raise DTypeError(
                f"{op}: expected output_size as a sequence of {n} ints (or {n + 2} with N and C), "
                f"got {checks.show(output_size)}."
            )
        given = tuple(output_size)
        if len(given) == n + 2:
            given = given[2:]
        if len(given) != n:
            raise ShapeError(
                f"{op}: expected output_size of {n} or {n + 2} entries, got {len(given)}: "
                f"{checks.show(output_size)}."
            )
        want = tuple(checks.int_arg(op, "output_size", v) for v in given)
        if n == 1:
            want = (1, *want)
    for i in range(2 - n, 2):
        if not default[i] - st[i] < want[i] < default[i] + st[i] or want[i] < 1:
            raise ShapeError(
                f"{op}: expected output_size {_shown(want, n)} within a stride "
                f"({_shown(st, n)}) of {_shown(default, n)}, the size the pooling came from "
                "(and positive). Pass the input's size before pooling."
            )
    return (int(want[0]), int(want[1]))


def _max_unpool(
    op: str,
    x: Any,
    indices: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    output_size: Any,
    n: int,
) -> Tensor:
    x, unbatched = _spatial(op, x, n)
    if not isinstance(indices, Tensor) or indices.dtype is not int64:
        got = indices.dtype.name if isinstance(indices, Tensor) else type(indices).__name__
        raise DTypeError(
            f"{op}: expected int64 indices (from max_pool{n}d(..., return_indices=True)), got "
            f"{got}."
        )
    idx = indices.unsqueeze_dim(0) if unbatched else indices
    idx = idx if n == 2 else idx.unsqueeze_dim(2)
    if idx.shape != x.shape:
        raise ShapeError(
            f"{op}: expected indices of the input's shape {_back(x, n, unbatched).shape}, got "
            f"{indices.shape}."
        )
    k = _geo(op, "kernel_size", kernel_size, 1, n)
    st = _stride(op, stride, k, n)
    pad = _geo(op, "padding", padding, 0, n)
    out = _unpool_size(op, (x.shape[2], x.shape[3]), k, st, pad, output_size, n)
    checks.alloc(op, (x.shape[0], x.shape[1], *out), x.dtype)
    _index_range(op, idx, out[0] * out[1], None)
    return _back(apply(_UNPOOL, (x, idx), {"output_size": out}), n, unbatched)


def max_unpool2d(
    x: Tensor,
    indices: Tensor,
    kernel_size: IntOrPair,
    stride: IntOrPair | None = None,
    padding: IntOrPair = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """The inverse of ``max_pool2d(..., return_indices=True)``: each value written at its index
    into zero planes, the rest zero.

    Args:
        x: (N, C, h, w) or (C, h, w), the pooled values.
        indices: int64 of x's shape, flat indices into each (H, W) plane.
        kernel_size, stride, padding: The pooling's (they give the default output size
            ``(h - 1) stride - 2 padding + kernel``).
        output_size: (H, W) (or (N, C, H, W)), within a stride of that default.

    Returns:
        (N, C, H, W). Differentiable in x: its gradient reads the incoming gradient at the
        indices (a repeated index: one of its values lands, each reads the gradient).
    """
    return _max_unpool("max_unpool2d", x, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool1d(
    x: Tensor,
    indices: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """The inverse of ``max_pool1d(..., return_indices=True)``: (N, C, l) -> (N, C, L), as
    ``max_unpool2d`` on a height-1 image."""
    return _max_unpool("max_unpool1d", x, indices, kernel_size, stride, padding, output_size, 1)


# ---------------------------------------------------------------- adaptive
def adaptive_avg_pool2d(x: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """Average over bins that split H and W into ``output_size`` parts (bins may overlap).

    Output row i averages input rows [floor(i H / Ho), ceil((i + 1) H / Ho)); ``None`` in
    ``output_size`` keeps that input size. x: (N, C, H, W) or (C, H, W) -> (N, C, Ho, Wo).
    """
    op = "adaptive_avg_pool2d"
    x, unbatched = _batched(op, x, 2, "(N, C, H, W)")
    if isinstance(output_size, (Sequence, np.ndarray)) and not isinstance(output_size, str):
        sizes = tuple(output_size)
    else:
        sizes = (output_size, output_size)
    if len(sizes) != 2:
        raise ShapeError(f"{op}: expected output_size to be an int or a pair, got {output_size!r}.")
    filled = tuple(x.shape[2 + i] if s is None else s for i, s in enumerate(sizes))
    out_size = _pair(op, "output_size", filled, 1)
    if x.shape[2] == 0 or x.shape[3] == 0:
        raise ShapeError(f"{op}: expected non-empty spatial dims, got input {x.shape}.")
    out = apply(OPS["adaptive_avg_pool2d"], (x,), {"output_size": out_size})
    return out.squeeze_dim(0) if unbatched else out
