"""``QuantScheme``: how a float tensor becomes int8 values with float32 scales.

A scheme is a value (equal schemes compare equal, hash alike, print as they are built). It says
which int dtype holds the values (int8 only), whether the mapping is symmetric (``x ~ q * s``,
``q`` in [-127, 127]) or affine (``x ~ (q - z) * s``, ``q`` in [-128, 127], an int zero point
``z``), and which elements share a scale: the whole tensor, one slice per index of an axis
(``("channel", axis)``) or consecutive blocks of ``size`` elements along the last dim
(``("block", size)``). SEMANTICS.md §11, API.md "Quantization".
"""

from __future__ import annotations

from typing import Any

from ..dtype import DType, int8
from ..errors import DTypeError, ShapeError

_MODES = ("symmetric", "affine")
Granularity = str | tuple[str, int]  # "tensor", ("channel", axis) or ("block", size)


def _granularity(g: Any) -> Granularity:
    if g == "tensor":
        return "tensor"
    if isinstance(g, (tuple, list)) and len(g) == 2 and g[0] in ("channel", "block"):
        kind, n = g[0], g[1]
        if type(n) is not int:
            raise DTypeError(
                f"QuantScheme: expected an int {'axis' if kind == 'channel' else 'size'} in "
                f"({kind!r}, n), got {type(n).__name__} {n!r}."
            )
        if kind == "block" and n < 1:
            raise ShapeError(f"QuantScheme: expected a block size >= 1, got {n}.")
        return (kind, n)
    raise DTypeError(
        f"QuantScheme: expected granularity 'tensor', ('channel', axis) or ('block', size), got "
        f"{g!r}. Example: em.QuantScheme(granularity=('channel', 0)) for a Linear weight."
    )


class QuantScheme:
    """How to quantize: int8 values, symmetric or affine, per tensor, channel or block.

    Args:
        dtype: The stored int dtype: ``em.int8``.
        mode: ``"symmetric"`` (scale only, values in [-127, 127]) or ``"affine"`` (scale and
            int zero point, values in [-128, 127]).
        granularity: ``"tensor"`` (one scale), ``("channel", axis)`` (one scale per index of
            ``axis``: axis 0 of a Linear weight is its output features) or ``("block", size)``
            (one scale per ``size`` consecutive elements of the last dim, which ``size`` must
            divide).

    Example:
        >>> s = QuantScheme(granularity=("channel", 0))
        >>> s
        QuantScheme(dtype=ember.int8, mode='symmetric', granularity=('channel', 0))
    """

    __slots__ = ("dtype", "granularity", "mode")

    dtype: DType
    mode: str
    granularity: Granularity

    def __init__(
        self, dtype: DType = int8, mode: str = "symmetric", granularity: Any = "tensor"
    ) -> None:
        if dtype is not int8:
            raise DTypeError(
                f"QuantScheme: expected dtype em.int8, got {dtype!r}; ember stores quantized "
                "values as int8 only."
            )
        if mode not in _MODES:
            raise DTypeError(f"QuantScheme: expected mode 'symmetric' or 'affine', got {mode!r}.")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "granularity", _granularity(granularity))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"QuantScheme is immutable; build a new one instead of setting {name}")

    @property
    def is_affine(self) -> bool:
        return self.mode == "affine"

    @property
    def block(self) -> int | None:
        """The block size of a ``("block", size)`` scheme, else ``None``."""
        g = self.granularity
        return g[1] if isinstance(g, tuple) and g[0] == "block" else None

    @property
    def channel_axis(self) -> int | None:
        """The axis of a ``("channel", axis)`` scheme, else ``None``."""
        g = self.granularity
        return g[1] if isinstance(g, tuple) and g[0] == "channel" else None

    @property
    def qmin(self) -> int:
        """The smallest stored value: -127 symmetric (so the range is symmetric), -128 affine."""
        return -128 if self.mode == "affine" else -127

    @property
    def qmax(self) -> int:
        return 127

    def _with_axis(self, axis: int) -> QuantScheme:
        """The same scheme for a per-channel axis that a layout op moved."""
        return QuantScheme(self.dtype, self.mode, ("channel", axis))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (records store it in their metadata)."""
        g = self.granularity
        return {
            "dtype": self.dtype.name,
            "mode": self.mode,
            "granularity": list(g) if g != "tensor" else g,
        }

    @staticmethod
    def from_json(d: Any) -> QuantScheme:
        """The scheme ``to_json`` wrote; ``DTypeError`` when ``d`` is no such dict."""
        if not isinstance(d, dict) or d.get("dtype") != int8.name:
            raise DTypeError(f"QuantScheme.from_json: expected a scheme dict, got {d!r}.")
        g = d.get("granularity")
        return QuantScheme(int8, d.get("mode", ""), tuple(g) if isinstance(g, list) else g)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, QuantScheme)
            and other.mode == self.mode
            and other.granularity == self.granularity
            and other.dtype is self.dtype
        )

    def __hash__(self) -> int:
        return hash((self.dtype.name, self.mode, self.granularity))

    def __repr__(self) -> str:
        return (
            f"QuantScheme(dtype={self.dtype!r}, mode={self.mode!r}, "
            f"granularity={self.granularity!r})"
        )
