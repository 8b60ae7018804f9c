"""Layout ops of quantized tensors: the values move, and the scales follow them.

Each op runs on the int8 values through the ``Tensor`` method of its name (so its argument
checks and errors are the usual ones), then applies the matching change to the scales (and
zero points): a permutation permutes them, a reshape relabels their size-1 axes, a slice slices
the axes that hold one scale per index. Rules (SEMANTICS.md §11):

- ``reshape`` / ``flatten`` / ``unsqueeze_dim`` / ``squeeze_dim`` must keep every axis that has
  its own scales intact (the same size, with the same number of elements before and after it);
  splitting or merging such an axis raises ``ShapeError`` (dequantize first).
- ``t[...]`` takes basic keys; on a block axis a slice must start and stop on block boundaries
  with step 1, and an int index there is refused (``ShapeError``): a block is never cut.
  An int index on the channel axis leaves one scale, a per-tensor quantized result.
- ``select(dim, indices)`` on a block axis is refused (``ShapeError``).
- ``cat`` joins quantized tensors of one scheme: along an axis with its own scales (the channel
  axis, a block axis) the scales are joined too; along any other axis the operands' scales must
  be equal (slices of one tensor), else ``DTypeError``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DTypeError, ShapeError
from . import checks
from .indexing import Reversed, normalize_key
from .layout import cat as _tensor_cat
from .qscheme import QuantScheme

if TYPE_CHECKING:
    from .quantized import QuantizedTensor
    from .tensor import Tensor


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for v in xs:
        n *= v
    return n


def _find(old: tuple[int, ...], new: tuple[int, ...], i: int) -> int | None:
    """The axis of ``new`` that is axis ``i`` of ``old`` kept whole, if there is one."""
    before, after = _prod(old[:i]), _prod(old[i + 1 :])
    p = 1
    for j, size in enumerate(new):
        if p == before and size == old[i] and _prod(new[j + 1 :]) == after:
            return j
        p *= size
    return None


def _make(
    values: Tensor,
    scales: Tensor,
    zeros: Tensor | None,
    like: QuantizedTensor,
    axis: int | None,
) -> QuantizedTensor:
    """A quantized tensor with ``like``'s class, scheme, float dtype and context (new arrays and
    axis); a channel scheme whose axis was indexed away becomes a per-tensor one."""
    q = object.__new__(type(like))
    q._values, q._scales, q._zeros = values, scales, zeros
    s = like._scheme
    if axis is None and s.channel_axis is not None:
        s = QuantScheme(s.dtype, s.mode, "tensor")
    q._scheme = s
    q._axis = axis
    q._float = like._float
    q._strategy = like._strategy
    return q


def _block(q: QuantizedTensor) -> int | None:
    return q._scheme.block


def _owns(q: QuantizedTensor, d: int) -> bool:
    """Whether axis ``d`` has scales of its own (one per index or block), rather than shared:
    every axis of a block tensor, the channel axis of a channel tensor."""
    return q._scheme.block is not None or (q._axis == d and q._scheme.channel_axis is not None)


def _both(q: QuantizedTensor, fn: Any) -> tuple[Tensor, Tensor | None]:
    """``fn`` applied to the scales and to the zero points (when there are any)."""
    return fn(q._scales), None if q._zeros is None else fn(q._zeros)


class QuantizedLayoutMethods:
    """Layout methods of ``QuantizedTensor`` (values and scales move together)."""

    __slots__ = ()

    def reshape(self: Any, shape: Any) -> QuantizedTensor:
        """Same values in ``shape``; every axis with its own scales must stay whole."""
        q: QuantizedTensor = self
        values = q._values.reshape(shape)
        old, new = q.shape, values.shape
        if new == old:
            return q
        k = _block(q)
        target = [1] * len(new)
        axis = None
        # a block tensor's scales follow the values on every axis but the block axis
        owned = (
            [q._axis]
            if k is not None
            else [i for i, sd in enumerate(q._scales.shape) if sd != 1 or i == q._axis]
        )
        for i in owned:
            if i is None:
                continue
            j = _find(old, new, i)
            if j is None and old[i] == 1 and k is None:
                continue  # a size-1 channel axis squeezed away: its one scale is the tensor's
            if j is None:
                raise ShapeError(
                    f"reshape: a quantized tensor {old} -> {new} would split or merge axis {i}, "
                    "which has its own scales. Reshape around that axis, or dequantize() first."
                )
            target[j] = q._scales.shape[i]
            if i == q._axis:
                axis = j
        if k is not None and axis is not None:
            target = [s // k if j == axis else s for j, s in enumerate(new)]
        scales, zeros = _both(q, lambda t: t.reshape(tuple(target)))
        return _make(values, scales, zeros, q, axis)

    def flatten(self: Any, start_dim: int = 0, end_dim: int = -1) -> QuantizedTensor:
        return self.reshape(self._values.flatten(start_dim, end_dim).shape)

    def unsqueeze_dim(self: Any, dim: int) -> QuantizedTensor:
        return self.reshape(self._values.unsqueeze_dim(dim).shape)

    def squeeze_dim(self: Any, dim: int) -> QuantizedTensor:
        return self.reshape(self._values.squeeze_dim(dim).shape)

    def permute(self: Any, dims: Any) -> QuantizedTensor:
        """Reorder the axes; the channel or block axis moves with them."""
        q: QuantizedTensor = self
        d = checks.dims("permute", dims, q.ndim)
        values = q._values.permute(d)
        scales, zeros = _both(q, lambda t: t.permute(d))
        axis = None if q._axis is None else d.index(q._axis)
        return _make(values, scales, zeros, q, axis)

    def swap_dims(self: Any, dim1: int, dim2: int) -> QuantizedTensor:
        n = self.ndim
        a, b = checks.dim("swap_dims", dim1, n), checks.dim("swap_dims", dim2, n)
        order = list(range(n))
        order[a], order[b] = b, a
        return self.permute(tuple(order))

    def transpose(self: Any) -> QuantizedTensor:
        """Swap the last two axes."""
        if self.ndim < 2:
            raise ShapeError(f"transpose: expected a tensor of rank >= 2, got shape {self.shape}.")
        return self.swap_dims(-1, -2)

    @property
    def T(self: Any) -> QuantizedTensor:
        """All dims reversed, as PyTorch's ``.T`` and ``Tensor.T`` (rank <= 1: unchanged)."""
        if self.ndim < 2:
            return self
        return self.permute(tuple(reversed(range(self.ndim))))

    def __getitem__(self: Any, key: Any) -> QuantizedTensor:
        """Basic indexing (ints, slices, None, ...); blocks are never cut."""
        q: QuantizedTensor = self
        shape = q.shape
        norm = normalize_key(shape, key)
        if type(norm) is Reversed:
            raise DTypeError(
                "index: a quantized tensor takes positive slice steps only, got a negative one. "
                "Dequantize first (q.dequantize()[::-1])."
            )
        if norm is None:
            raise DTypeError(
                "index: a quantized tensor takes basic keys only (ints, slices, None, ...), got "
                "tensors or lists. Use q.select(dim, indices) for rows, or dequantize() first."
            )
        if not norm:
            return q
        k = _block(q)
        sshape = q._scales.shape
        skey: list[Any] = []
        axis_in, axis_out, new_axis = 0, 0, None
        for entry in norm:
            if entry is Ellipsis:
                skip = len(shape) - sum(1 for e in norm if e is not None and e is not Ellipsis)
                skey.append(Ellipsis)
                if q._axis is not None and axis_in <= q._axis < axis_in + skip:
                    new_axis = axis_out + q._axis - axis_in
                axis_in += skip
                axis_out += skip
                continue
            if entry is None:
                skey.append(None)
                axis_out += 1
                continue
            i = axis_in
            blocked = k is not None and k > 1 and i == q._axis
            shared = sshape[i] == 1 and not blocked
            if isinstance(entry, builtins.slice):
                start, stop, step = entry.indices(shape[i])
                if shared:
                    skey.append(builtins.slice(None))
                elif blocked:
                    stop = max(stop, start)
                    if step != 1 or start % k or stop % k:  # type: ignore[operator]
                        raise ShapeError(
                            f"index: slice {start}:{stop}:{step} of axis {i} cuts its blocks of "
                            f"{k} (each block has one scale). Slice on block boundaries with "
                            "step 1, or dequantize() first."
                        )
                    skey.append(builtins.slice(start // k, stop // k))  # type: ignore[operator]
                else:
                    skey.append(entry)
                if i == q._axis:
                    new_axis = axis_out
                axis_out += 1
            else:
                if blocked:
                    raise ShapeError(
                        f"index: an int index on axis {i} would take one element of a block of "
                        f"{k}; slice whole blocks, or dequantize() first."
                    )
                skey.append(0 if shared else entry)
            axis_in += 1
        if q._axis is not None and q._axis >= axis_in:  # an axis the key leaves whole
            new_axis = axis_out + q._axis - axis_in
        values = q._values[tuple(norm)]
        scales, zeros = _both(q, lambda t: t[tuple(skey)])
        return _make(values, scales, zeros, q, new_axis)

    def slice(self: Any, ranges: Any) -> QuantizedTensor:
        """One ``slice`` (or int) per leading dim, as ``Tensor.slice``."""
        from .index import slice_key

        return self[slice_key("slice", ranges)]

    def narrow(self: Any, dim: int, start: int, length: int) -> QuantizedTensor:
        """Elements ``start .. start + length`` of ``dim``."""
        d = checks.dim("narrow", dim, self.ndim)
        piece = self._values.narrow(d, start, length)  # the usual checks
        s = start + self.shape[d] if start < 0 else start
        del piece
        return self[(builtins.slice(None),) * d + (builtins.slice(s, s + length),)]

    def select(self: Any, dim: int, indices: Any) -> QuantizedTensor:
        """Slices ``indices`` of ``dim``, in that order; the scales of each come along."""
        q: QuantizedTensor = self
        d = checks.dim("select", dim, q.ndim)
        values = q._values.select(d, indices)
        if _block(q) is not None and d == q._axis:
            raise ShapeError(
                f"select: axis {d} is quantized in blocks of {_block(q)}; selecting single "
                "elements would cut them. Select along another axis, or dequantize() first."
            )
        if not _owns(q, d):
            scales, zeros = q._scales, q._zeros
        else:
            idx = (
                indices.to_device(q._values._hardware) if hasattr(indices, "to_device") else indices
            )
            scales, zeros = _both(q, lambda t: t.select(d, idx))
        return _make(values, scales, zeros, q, q._axis)


def cat(qs: Sequence[QuantizedTensor], dim: int = 0) -> QuantizedTensor:
    """Join quantized tensors of one scheme along ``dim`` (see the module docstring)."""
    items = list(qs)
    if not items:
        raise ShapeError("cat: expected a non-empty list of tensors, got an empty one.")
    if not all(isinstance(q, QuantizedLayoutMethods) for q in items):
        kinds = sorted({type(q).__name__ for q in items})
        raise DTypeError(
            f"cat: expected quantized tensors only, got {kinds}. Quantize every operand with "
            "one scheme, or dequantize() the quantized ones first."
        )
    first = items[0]
    d = checks.dim("cat", dim, first.ndim) if first.ndim else 0
    for i, q in enumerate(items[1:], 1):
        if q._scheme != first._scheme or q._axis != first._axis or q._float is not first._float:
            raise DTypeError(
                f"cat: operand {i} is {q.scheme!r} from {q._float.name}, operand 0 is "
                f"{first.scheme!r} from {first._float.name}; quantized operands must share one "
                "scheme. Dequantize them first."
            )
    values = _tensor_cat([q._values for q in items], d)
    if len(items) == 1:
        return first
    if not _owns(first, d):
        ref = first._scales.to_numpy()
        zref = None if first._zeros is None else first._zeros.to_numpy()
        for i, q in enumerate(items[1:], 1):
            same = (q._scales.to_numpy() == ref).all() and (
                zref is None or (q._zeros.to_numpy() == zref).all()  # type: ignore[union-attr]
            )
            if not same:
                raise DTypeError(
                    f"cat: operand {i} has other scales than operand 0 along dim {d}, which "
                    "shares its scales; the joined tensor could not hold both. Join along the "
                    "quantized axis, quantize the joined float tensor, or dequantize() first."
                )
        return _make(values, first._scales, first._zeros, first, first._axis)
    scales = _tensor_cat([q._scales for q in items], d)
    zeros = None if first._zeros is None else _tensor_cat([q._zeros for q in items], d)  # type: ignore[misc]
    return _make(values, scales, zeros, first, first._axis)
