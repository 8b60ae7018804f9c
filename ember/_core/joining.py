"""``Tensor.cat`` and ``Tensor.stack``: list-input rows. Plain members join as constants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..dtype import promote
from ..errors import ShapeError
from ..ops import OPS
from . import checks
from .dispatch import apply, cast

if TYPE_CHECKING:
    from .tensor import Tensor


def _common(op: str, tensors: Sequence[Tensor]) -> list[Tensor]:
    from .tensor import Tensor

    ts = list(tensors)
    if not ts:
        raise ShapeError(f"{op}: expected a non-empty list of tensors, got an empty one.")
    for t in ts:
        if not isinstance(t, Tensor):
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
