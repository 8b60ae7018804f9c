"""The bounded cache of recordings of one captured function, oldest dropped first."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class RecordingCache(Generic[R]):
    """At most ``limit`` recordings by signature; a hit moves the entry to the newest end.

    Dropping a recording releases what it holds (a CUDA graph and its memory pool).
    """

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: OrderedDict[Any, R] = OrderedDict()

    def get(self, key: Any) -> R | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: Any, entry: R) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
