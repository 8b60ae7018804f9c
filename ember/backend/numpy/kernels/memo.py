"""Values a NumPy forward kernel keeps for the backward of the same call, per live input array.

A backward kernel receives the forward's inputs, not what the forward computed on the way
(batch norm's per-channel sums, max pooling's window maxima). A ``Memo`` keeps those by the
input array's identity and the call's attributes; the entry goes when its array does (a weak
reference), so nothing outlives the step that made it. The backward of an array that is not
the forward's own (a copy, a checkpointed recomputation into new memory) finds nothing and
computes again: the results are the same bits either way. ember's arrays are not written in
place between a forward and its backward, so identity is enough (the torch backend's
``stats.py`` also checks tensors' versions).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import Any

import numpy as np


class Memo:
    """Values kept per (live array, call attributes).

    Example:
        >>> m = Memo()
        >>> x = np.ones(3)
        >>> m.put(x, ("k", 2), "kept")
        >>> m.get(x, ("k", 2)), m.get(x, ("k", 3)), m.get(np.ones(3), ("k", 2))
        ('kept', None, None)
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[weakref.ref[np.ndarray], Any]] = {}

    def put(self, x: np.ndarray, ident: Hashable, value: Any) -> None:
        """Keep ``value`` for calls on ``x`` with attributes ``ident`` (replacing an older one)."""
        key = (id(x), ident)
        entries = self._entries

        def forget(ref: weakref.ref[np.ndarray]) -> None:
            entry = entries.get(key)
            if entry is not None and entry[0] is ref:
                entries.pop(key, None)

        entries[key] = (weakref.ref(x, forget), value)

    def get(self, x: np.ndarray, ident: Hashable) -> Any:
        """The value kept for ``x`` itself and ``ident``, or None."""
        entry = self._entries.get((id(x), ident))
        if entry is None or entry[0]() is not x:
            return None
        return entry[1]

    def __len__(self) -> int:
        return len(self._entries)
