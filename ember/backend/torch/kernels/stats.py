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


def _layout(t: Tensor) -> tuple[Any, ...]:
    """Where ``t``'s values live: its memory and layout."""
    return (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device)


def _owner(t: Tensor) -> Tensor:
    base = t._base
    return t if base is None else base


def _ident(ident: tuple[Any, ...]) -> tuple[Any, ...]:
    # tensors by memory, layout and version (the version counts in-place writes)
    return tuple([(_layout(a), a._version) if isinstance(a, torch.Tensor) else a for a in ident])


def _remember(owner: Tensor, tag: str, ident: tuple[Any, ...], value: Any) -> None:
    """Keep ``value`` for the backward of the same call on ``owner`` (``ident`` names it).

    One entry per layout of the owning buffer: a later call on the same view replaces it.
    """
    slot = _owner(owner).__dict__.setdefault("_ember_" + tag, {})
    slot[_layout(owner)] = (owner._version, _ident(ident), value)


def _recall(owner: Tensor, tag: str, ident: tuple[Any, ...]) -> Any:
    slot = _owner(owner).__dict__.get("_ember_" + tag)
    if slot is None:
        return None
    entry = slot.get(_layout(owner))
    if entry is None or entry[0] != owner._version or entry[1] != _ident(ident):
        return None
    return entry[2]
