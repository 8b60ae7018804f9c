"""Layout methods of ``Tensor`` (``LayoutMethods``, a mixin): reshape, permute and transpose,
squeeze/unsqueeze, expand, flip, repeat, triangles, one-hot, narrow/chunk/split and the
list-input ``cat``/``stack``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..dtype import promote
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .base import AnyTensor
from .dispatch import _record, apply, apply1, cast, wrap
from .index import check_range

if TYPE_CHECKING:
    from .tensor import Tensor


_RESHAPE, _PERMUTE, _EXPAND = OPS["reshape"], OPS["permute"], OPS["expand"]
# resolved arguments of the hot layout ops, checked once per distinct argument: (source shape,
# shape argument) -> target, and (rank, dim1, dim2) -> permutation; None means "no change"
_RESHAPES: dict[tuple[Any, Any], tuple[int, ...] | None] = {}
_SWAPS: dict[tuple[int, int, int], tuple[int, ...] | None] = {}
_CACHE_SIZE = 4096
# (dim, size, step) -> the sizes and index attrs of a split's pieces (``_piece_plan``)
_PLANS: dict[tuple[int, int, int], tuple[tuple[int, ...], tuple[dict[str, Any], ...]]] = {}


def _reshape_target(src: Any, shape: Any) -> tuple[int, ...] | None:
    target = checks.reshape_target("reshape", tuple(src), shape)
    out = None if target == src else target
    if type(shape) is tuple:
        if len(_RESHAPES) >= _CACHE_SIZE:
            _RESHAPES.clear()
        try:
            _RESHAPES[src, shape] = out
        except TypeError:  # unhashable sizes: checked again on every call
            pass
    return out


def reshape(self: Tensor, shape: Any) -> Tensor:
    """Same values in ``shape`` (one -1 is inferred)."""
    src = self._data.shape
    if type(shape) is tuple:
        try:
            target = _RESHAPES[src, shape]
        except (KeyError, TypeError):
            target = _reshape_target(src, shape)
    else:
        target = _reshape_target(src, shape)
    if target is None:
        return self
    return apply1(_RESHAPE, self, {"shape": target})


def permute(self: Tensor, dims: Any) -> Tensor:
    """Reorder the axes: output axis i is input axis ``dims[i]``."""
    n = self._data.ndim
    d = checks.dims("permute", dims, n)
    if len(d) != n:
        raise ShapeError(f"permute: expected {n} dims (one per axis), got {tuple(dims)}.")
    if d == tuple(range(n)):
        return self
    return apply(_PERMUTE, (self,), {"dims": d})


def _swap_order(n: int, dim1: int, dim2: int) -> tuple[int, ...] | None:
    a = checks.dim("swap_dims", dim1, n)
    b = checks.dim("swap_dims", dim2, n)
    out = None
    if a != b:
        order = list(range(n))
        order[a], order[b] = order[b], order[a]
        out = tuple(order)
    if type(dim1) is int and type(dim2) is int:  # never bools, which checks.dim rejects
        if len(_SWAPS) >= _CACHE_SIZE:
            _SWAPS.clear()
        _SWAPS[n, dim1, dim2] = out
    return out


def swap_dims(self: Tensor, dim1: int, dim2: int) -> Tensor:
    """Exchange two axes."""
    n = self._data.ndim
    if type(dim1) is int and type(dim2) is int:
        try:
            order = _SWAPS[n, dim1, dim2]
        except KeyError:
            order = _swap_order(n, dim1, dim2)
    else:
        order = _swap_order(n, dim1, dim2)
    if order is None:
        return self
    # two distinct valid dims make a valid permutation: the row directly, without permute's checks
    return apply1(_PERMUTE, self, {"dims": order})


def transpose(self: Tensor) -> Tensor:
    """Swap the last two axes."""
    if self._data.ndim < 2:
        raise ShapeError(
            f"transpose: expected a tensor of rank >= 2, got shape {self.shape}. "
            "Use unsqueeze_dim to add an axis first."
        )
    return swap_dims(self, -2, -1)


def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes ``start_dim..end_dim`` (inclusive) into one."""
    if self.ndim == 0:
        return self.reshape((1,))
    s = checks.dim("flatten", start_dim, self.ndim)
    e = checks.dim("flatten", end_dim, self.ndim)
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}.")
    shape = self.shape
    return self.reshape(
        (*shape[:s], -1, *shape[e + 1 :]) if 0 not in shape else (*shape[:s], 0, *shape[e + 1 :])
    )


def unsqueeze_dim(self: Tensor, dim: int) -> Tensor:
    """Insert a size-1 axis at ``dim`` (-1 appends)."""
    shape = tuple(self._data.shape)
    n = len(shape)
    if type(dim) is int and not -n - 1 <= dim <= n:  # the tensor's rank, the result's range
        raise ShapeError(
            f"unsqueeze_dim: dim {dim} is out of range for a tensor of rank {n} (expected "
            f"{-n - 1}..{n}: a new axis goes before one of the {n} axes or after the last)."
        )
    d = checks.dim("unsqueeze_dim", dim, n + 1)
    return apply(_RESHAPE, (self,), {"shape": (*shape[:d], 1, *shape[d:])})


def squeeze_dim(self: Tensor, dim: int) -> Tensor:
    """Remove the size-1 axis ``dim``."""
    shape = tuple(self._data.shape)
    d = checks.dim("squeeze_dim", dim, len(shape))
    if shape[d] != 1:
        raise ShapeError(
            f"squeeze_dim: expected size 1 at dim {dim}, got {shape[d]} (shape {shape})."
        )
    return apply(_RESHAPE, (self,), {"shape": shape[:d] + shape[d + 1 :]})


def expand(self: Tensor, shape: Any) -> Tensor:
    """Broadcast to ``shape`` (new leading axes allowed; -1 keeps a size)."""
    shape = checks.sizes("expand", shape, lo=-1)
    want = [s if s != -1 else 0 for s in shape]
    src = self.shape
    if len(want) < len(src):
        raise ShapeError(f"expand: target {tuple(shape)} has fewer axes than the tensor {src}.")
    lead = len(want) - len(src)
    for i in range(lead):
        if shape[i] == -1:
            raise ShapeError(
                f"expand: -1 keeps an existing size, but axis {i} of {tuple(shape)} is a new "
                f"leading axis of the tensor {src}. Give its size."
            )
    for i, s in enumerate(src):
        t = shape[lead + i]
        if t == -1:
            want[lead + i] = s
        elif s != t and s != 1:
            raise ShapeError(
                f"expand: cannot expand size {s} at axis {i} to {t} (shape {src} -> "
                f"{tuple(shape)}). Only size-1 axes expand; use repeat_dim to copy."
            )
    target = tuple(want)
    if target == src:
        return self
    return apply(_EXPAND, (self,), {"shape": target})


_INDEX = OPS["index"]

if TYPE_CHECKING:
    from .tensor import Tensor

_FLIP, _REPEAT, _TRIL, _TRIU = OPS["flip"], OPS["repeat_dim"], OPS["tril"], OPS["triu"]


def _int_arg(op: str, name: str, v: object, lo: int = 0, hi: int | None = None) -> int:
    return checks.int_arg(op, name, v, lo, hi)


def flip(self: Tensor, dims: int | Sequence[int]) -> Tensor:
    """Reverse the order of elements along ``dims`` (an int or a sequence of dims).

    Example:
        >>> em.tensor([[1, 2], [3, 4]]).flip([1]).tolist()
        [[2, 1], [4, 3]]
    """
    ds: Any = (dims,) if isinstance(dims, int) and not isinstance(dims, bool) else dims
    d = checks.dims("flip", ds, self.ndim)
    if not d:
        return self
    return apply(_FLIP, (self,), {"dims": tuple(sorted(d))})


def repeat_dim(self: Tensor, dim: int, times: int) -> Tensor:
    """Concatenate ``times`` copies along ``dim``: shape (.., n, ..) -> (.., times * n, ..).

    Example:
        >>> em.tensor([[1, 2]]).repeat_dim(1, 2).tolist()
        [[1, 2, 1, 2]]
    """
    d = checks.dim("repeat_dim", dim, self.ndim)
    n = _int_arg("repeat_dim", "times", times)
    if n == 1:
        return self
    shape = self.shape
    checks.alloc("repeat_dim", (*shape[:d], shape[d] * n, *shape[d + 1 :]), self.dtype)
    return apply(_REPEAT, (self,), {"dim": d, "times": n})


def _tri(self: Tensor, op: str, diagonal: int) -> Tensor:
    if self.ndim < 2:
        raise ShapeError(
            f"{op}: expected a tensor of rank >= 2 (the last two dims form the matrices), got "
            f"shape {self.shape}. Add a dim with unsqueeze_dim."
        )
    k = _int_arg(op, "diagonal", diagonal, lo=-(1 << 62), hi=1 << 62)
    return apply(_TRIL if op == "tril" else _TRIU, (self,), {"diagonal": k})


def tril(self: Tensor, diagonal: int = 0) -> Tensor:
    """Keep elements on and below diagonal ``diagonal`` of the last two dims; zero the rest.

    ``diagonal`` 0 is the main diagonal, positive values go above it, negative below.
    """
    return _tri(self, "tril", diagonal)


def triu(self: Tensor, diagonal: int = 0) -> Tensor:
    """Keep elements on and above diagonal ``diagonal`` of the last two dims; zero the rest."""
    return _tri(self, "triu", diagonal)


def one_hot(self: Tensor, num_classes: int) -> Tensor:
    """One-hot encoding of int class indices: shape (...) -> (..., num_classes), same int dtype.

    Example:
        >>> em.tensor([0, 2]).one_hot(3).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    if not self.dtype.is_int:
        raise DTypeError(
            f"one_hot: expected int class indices, got {self.dtype.name}. Convert with .int()."
        )
    n = _int_arg("one_hot", "num_classes", num_classes)
    checks.alloc("one_hot", (*self.shape, n), self.dtype)
    check_range("one_hot", self, self.ndim, n)
    classes = type(self).arange(0, n, device=self._dev)
    return (self.unsqueeze_dim(-1) == classes).cast(self.dtype)


def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    """Elements ``start .. start + length`` of ``dim`` (a negative ``start`` counts from the end).

    Example:
        >>> em.tensor([1, 2, 3, 4]).narrow(0, 1, 2).tolist()
        [2, 3]
    """
    d = checks.dim("narrow", dim, self.ndim)
    size = self.shape[d]
    s = _int_arg("narrow", "start", start, lo=-size)
    s = s + size if s < 0 else s
    n = _int_arg("narrow", "length", length)
    if s + n > size:
        raise ShapeError(
            f"narrow: start {start} + length {length} exceeds size {size} of dim {dim} "
            f"(shape {self.shape}); expected start + length <= {size}."
        )
    return _piece(self, d, s, n)


def _piece(x: Tensor, d: int, start: int, length: int) -> Tensor:
    # the key is already in normalize_key's form: the index row directly, no key parsing
    return apply(_INDEX, (x,), {"key": (slice(None),) * d + (slice(start, start + length),)})


def _piece_plan(d: int, size: int, step: int) -> tuple[tuple[int, ...], tuple[dict[str, Any], ...]]:
    """Sizes and ``index`` attrs of ``_pieces``' pieces, one shared plan per (dim, size, step):
    the nodes of every split with that plan read the same attrs (none writes them), so a
    recorded split keeps no key tuples, slices or dicts of its own."""
    plan = _PLANS.get((d, size, step))
    if plan is None:
        if len(_PLANS) >= _CACHE_SIZE:
            _PLANS.clear()
        lead = (slice(None),) * d
        starts = range(0, size, step)
        sizes = tuple([min(step, size - s) for s in starts])
        attrs = tuple([{"key": (*lead, slice(s, s + n))} for s, n in zip(starts, sizes)])
        plan = _PLANS[d, size, step] = (sizes, attrs)
    return plan


def _pieces(x: Tensor, d: int, size: int, step: int) -> list[Tensor]:
    """Consecutive ``index`` pieces of ``step`` along ``d`` (the last holds the remainder).

    Each piece is its own ``index`` row, as ``narrow`` records it. Their
    values come from one ``split_views`` call (one split kernel where a backend has a cheaper
    one than indexing each piece: the same views).
    """
    if size <= step:
        return [_piece(x, d, s, min(step, size - s)) for s in range(0, size, step)]
    sizes, attrs = _piece_plan(d, size, step)
    data = x._data
    dev = x._dev
    b = dev.b
    outs = b.split_views(data, sizes, d)
    strategy = x._strategy
    cls = x.__class__
    pieces = []
    for at, out in zip(attrs, outs):
        if type(out) is not b.array_type:
            out = b.asarray(out)
        if strategy is None:
            pieces.append(wrap(cls, out, dev))
        else:
            pieces.append(_record(_INDEX, cls, (x._node,), (data,), out, at, strategy, dev))
    return pieces


def chunk(self: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
    """Split ``dim`` into pieces of ``ceil(size / chunks)``, the last possibly smaller.

    As in PyTorch, fewer than ``chunks`` pieces come back when the size runs out first, and a
    size-0 dim gives ``chunks`` empty pieces.

    Example:
        >>> [c.shape for c in em.Tensor.zeros((5,)).chunk(3)]
        [(2,), (2,), (1,)]
    """
    d = checks.dim("chunk", dim, self._data.ndim)
    n = _int_arg("chunk", "chunks", chunks, lo=1)
    size = self._data.shape[d]
    if size == 0:
        return [self.narrow(d, 0, 0) for _ in range(n)]
    return _pieces(self, d, size, -(-size // n))


def split(self: Tensor, split_size: int, dim: int = 0) -> list[Tensor]:
    """Pieces of ``split_size`` along ``dim``; the last holds the remainder.

    Example:
        >>> [c.shape for c in em.Tensor.zeros((5,)).split(2)]
        [(2,), (2,), (1,)]
    """
    d = checks.dim("split", dim, self._data.ndim)
    step = _int_arg("split", "split_size", split_size, lo=1)
    size = self._data.shape[d]
    if size == 0:
        return [self]
    return _pieces(self, d, size, step)


def _common(op: str, tensors: Sequence[Tensor]) -> list[Tensor]:
    ts = list(tensors)
    if not ts:
        raise ShapeError(f"{op}: expected a non-empty list of tensors, got an empty one.")
    for t in ts:
        if not isinstance(t, AnyTensor):
            if getattr(t, "is_quantized", None) is not None:  # a QuantizedTensor
                raise DTypeError(
                    f"{op}: expected float or int tensors, got a quantized one. Join quantized "
                    "tensors of one scheme with QuantizedTensor.cat(qs, dim) (q.cat), or "
                    "dequantize() them first."
                )
            raise ShapeError(f"{op}: expected tensors, got {type(t).__name__}.")
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = promote(dt, t.dtype)
    return [cast(t, dt) for t in ts]


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    ts = _common("cat", tensors)
    ref = ts[0].shape
    if not ref:
        raise ShapeError("cat: 0-d tensors cannot be concatenated; use stack.")
    d = checks.dim("cat", dim, len(ref))
    for i, t in enumerate(ts):
        s = t.shape
        if len(s) != len(ref) or s[:d] + s[d + 1 :] != ref[:d] + ref[d + 1 :]:
            raise ShapeError(
                f"cat: tensor {i} has shape {s} but tensor 0 has {ref}; all sizes except dim "
                f"{dim} must match."
            )
    if len(ts) == 1:
        return ts[0]
    return apply(OPS["cat"], ts, {"dim": d})


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    ts = _common("stack", tensors)
    ref = ts[0].shape
    d = checks.dim("stack", dim, len(ref) + 1)
    for i, t in enumerate(ts):
        if t.shape != ref:
            raise ShapeError(
                f"stack: tensor {i} has shape {t.shape} but tensor 0 has {ref}; all must match."
            )
    return apply(OPS["stack"], ts, {"dim": d})


class LayoutMethods:
    """Shape, order and joining of elements."""

    __slots__ = ()

    reshape = reshape
    permute = permute
    swap_dims = swap_dims
    transpose = transpose
    flatten = flatten
    unsqueeze_dim = unsqueeze_dim
    squeeze_dim = squeeze_dim
    expand = expand
    flip = flip
    repeat_dim = repeat_dim
    tril = tril
    triu = triu
    one_hot = one_hot
    narrow = narrow
    chunk = chunk
    split = split
    T = property(transpose)
    cat = staticmethod(cat)
    stack = staticmethod(stack)
