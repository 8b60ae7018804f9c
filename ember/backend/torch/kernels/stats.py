"""Statistics a torch forward kernel remembers for its backward, and the shared aliases.

Backward kernels of layer norm, batch norm, max pooling and fused attention need statistics that
the forward computed (mean and rstd, argmax indices, log-sum-exp). The forward remembers them on
the tensor that owns its input's memory (``_remember``), under the input's layout; the backward
finds them again from an input with the same memory, layout and version: the same object, or a
view rebuilt over the same buffer (gradient checkpointing recomputes views of kept outputs). When
they are missing (the input itself was recomputed into new memory) the backward recomputes them.
"""

from __future__ import annotations

from typing import Any

import torch

Tensor = torch.Tensor
Pair = tuple[int, int]
aten = torch.ops.aten


def _ident(ident: tuple[Any, ...]) -> tuple[Any, ...]:
    """``ident`` with its tensors named by memory, layout and version (in-place writes count)."""
    for a in ident:
        if isinstance(a, Tensor):
            return tuple(
                [
                    (t.data_ptr(), t.shape, t.stride(), t.dtype, t._version)
                    if isinstance(t, Tensor)
                    else t
                    for t in ident
                ]
            )
    return ident


def _remember(owner: Tensor, tag: str, ident: tuple[Any, ...], value: Any) -> None:
    """Keep ``value`` for the backward of the same call on ``owner`` (``ident`` names it).

    One entry per layout of the owning buffer (memory address, sizes, strides, dtype; the
    device is the buffer's): a later call on the same view replaces it.
    """
    base = owner._base
    d = (owner if base is None else base).__dict__
    key = "_ember_" + tag
    slot = d.get(key)
    if slot is None:
        slot = d[key] = {}
    layout = (owner.data_ptr(), owner.shape, owner.stride(), owner.dtype)
    slot[layout] = (owner._version, _ident(ident), value)


def _recall(owner: Tensor, tag: str, ident: tuple[Any, ...]) -> Any:
    base = owner._base
    slot = (owner if base is None else base).__dict__.get("_ember_" + tag)
    if slot is None:
        return None
    entry = slot.get((owner.data_ptr(), owner.shape, owner.stride(), owner.dtype))
    if entry is None or entry[0] != owner._version or entry[1] != _ident(ident):
        return None
    return entry[2]
