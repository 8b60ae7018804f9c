"""ember's dtypes and the promotion rules shared by every backend.

Promotion (documented in the README):
- two tensors of one dtype keep it;
- float with float gives the wider float; float16 with bfloat16 gives float32;
- int with float gives the float; int32 with int64 gives int64; bool joins anything as that thing;
- a Python scalar never changes a float tensor's dtype; a Python float with an int or bool tensor
  gives float32 (the default float), a Python int with a bool tensor gives int64.
"""

from __future__ import annotations


class DType:
    """A tensor element type. Compare with ``is`` or ``==``; instances are singletons."""

    __slots__ = ("itemsize", "kind", "name", "rank")

    def __init__(self, name: str, itemsize: int, kind: str, rank: int) -> None:
        self.name = name
        self.itemsize = itemsize
        self.kind = kind  # "f" float, "i" signed int, "b" bool
        self.rank = rank  # order within a kind, for promotion

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self) -> str:
        return self.name


float16 = DType("float16", 2, "f", 1)
bfloat16 = DType("bfloat16", 2, "f", 1)
float32 = DType("float32", 4, "f", 3)
float64 = DType("float64", 8, "f", 4)
int8 = DType("int8", 1, "i", 0)  # the stored values of quantized tensors
int32 = DType("int32", 4, "i", 1)
int64 = DType("int64", 8, "i", 2)
bool_ = DType("bool", 1, "b", 0)

DTYPES: dict[str, DType] = {
    d.name: d for d in (float16, bfloat16, float32, float64, int8, int32, int64, bool_)
}
DEFAULT_FLOAT = float32
DEFAULT_INT = int64


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between tensors of dtypes ``a`` and ``b``."""
    if a is b:
        return a
    if a.kind == b.kind:
        if a.rank == b.rank:  # float16 with bfloat16
            return float32
        return a if a.rank > b.rank else b
    if a.kind == "f":
        return a
    if b.kind == "f":
        return b
    return a if a.kind == "i" else b  # int with bool


def scalar_dtype(t: DType, value: object) -> DType:
    """dtype of ``tensor <op> scalar``: the tensor's; a float scalar lifts int/bool to float32."""
    if isinstance(value, float) and t.kind != "f":
        return DEFAULT_FLOAT
    if isinstance(value, int) and not isinstance(value, bool) and t.kind == "b":
        return DEFAULT_INT
    return t


def as_dtype(d: object) -> DType:
    """Accept an ember dtype or its name."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str) and d in DTYPES:
        return DTYPES[d]
    from .errors import DTypeError

    raise DTypeError(
        f"dtype: expected one of {sorted(DTYPES)} (or em.float32 ...), got {d!r}. "
        "Use the names exported by ember, e.g. em.float32."
    )
