"""Lazily summed gradients of slices (``SliceGrad``), which the backward engine materializes."""

from __future__ import annotations

from typing import Any


class SliceGrad:
    """A gradient that is zero outside slices of one dim: what ``narrow``/``split`` pieces give.

    A backward rule may return one for an input instead of a zero-padded array. The engine sums
    such gradients lazily (``+`` collects the parts) and builds the array only when the input's
    own step runs: pieces that tile the dim exactly (the q, k and v of a split projection) are
    concatenated once, with no zero buffers and no additions; anything else falls back to the
    zero-padded parts summed in arrival order, the values eager accumulation gives.

    Attributes:
        shape: The input's full shape.
        dim: The sliced dim.
        parts: ``(start, values)`` pairs in arrival order; ``values`` spans ``start`` onwards.
    """

    __slots__ = ("b", "dim", "parts", "shape")
    __array_ufunc__ = None  # ``ndarray + SliceGrad`` defers to ``__radd__``

    def __init__(self, b: Any, shape: Any, dim: int, start: int, values: Any) -> None:
        self.b = b
        self.shape = shape
        self.dim = dim
        self.parts: list[tuple[int, Any]] = [(start, values)]

    def __add__(self, other: Any) -> Any:
        if type(other) is SliceGrad and other.dim == self.dim:
            out = SliceGrad.__new__(SliceGrad)
            out.b, out.shape, out.dim = self.b, self.shape, self.dim
            out.parts = self.parts + other.parts
            return out
        return self.dense() + (other.dense() if type(other) is SliceGrad else other)

    def __radd__(self, other: Any) -> Any:
        return other + self.dense()

    def dense(self) -> Any:
        """The gradient as an array of ``shape``."""
        b, d, parts = self.b, self.dim, self.parts
        if len(parts) > 1:
            ordered = sorted(parts, key=lambda p: p[0])
            pos = 0
            dtype = ordered[0][1].dtype
            for start, v in ordered:
                if start != pos or v.dtype != dtype:
                    break
                pos += v.shape[d]
            else:
                if pos == self.shape[d]:
                    return b.cat([v for _, v in ordered], d)
        out = None
        for start, v in parts:
            key = (slice(None),) * d + (slice(start, start + v.shape[d]),)
            z = b.index_put_zeros(self.shape, key, v)
            out = z if out is None else out + z
        return out
