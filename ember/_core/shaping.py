"""Shape methods of ``Tensor``: flip, repeat_dim, tril/triu, one_hot, narrow, chunk, split."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from .dispatch import _record, apply, wrap

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
    from .select import check_range
    from .tensor import Tensor

    if not self.dtype.is_int:
        raise DTypeError(
            f"one_hot: expected int class indices, got {self.dtype.name}. Convert with .int()."
        )
    n = _int_arg("one_hot", "num_classes", num_classes)
    checks.alloc("one_hot", (*self.shape, n), self.dtype)
    check_range("one_hot", self, self.ndim, n)
    classes = Tensor.arange(0, n, device=self._dev)
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


def _pieces(x: Tensor, d: int, size: int, step: int) -> list[Tensor]:
    """Consecutive ``index`` pieces of ``step`` along ``d`` (the last holds the remainder).

    Each piece is its own ``index`` row, as ``narrow`` records it. Their
    values come from one ``split_views`` call (one split kernel where a backend has a cheaper
    one than indexing each piece: the same views).
    """
    starts = range(0, size, step)
    if len(starts) < 2:
        return [_piece(x, d, s, min(step, size - s)) for s in starts]
    data = x._data
    dev = x._dev
    b = dev.b
    lead = (slice(None),) * d
    keys = [(*lead, slice(s, min(s + step, size))) for s in starts]
    outs = b.split_views(data, [min(step, size - s) for s in starts], d)
    strategy = x._strategy
    cls = x.__class__
    pieces = []
    for key, out in zip(keys, outs):
        if type(out) is not b.array_type:
            out = b.asarray(out)
        if strategy is None:
            pieces.append(wrap(cls, out, dev))
        else:
            pieces.append(
                _record(_INDEX, cls, (x._node,), (data,), out, {"key": key}, strategy, dev)
            )
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
