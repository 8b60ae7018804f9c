"""Running the wrapped function under the host-read guard (``ember/_core/hostread.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .._core.hostread import refuse, reset_guard, set_guard


class HostReads:
    """The host reads seen while the guard noted them instead of refusing (``fallback=True``)."""

    __slots__ = ("ops",)

    def __init__(self) -> None:
        self.ops: list[str] = []


@contextmanager
def guarded(name: str, *, note: bool = False) -> Iterator[HostReads]:
    """Inside the block a host read raises ``CaptureError`` naming the op and ``name`` (the
    captured function), or, with ``note``, is allowed and listed in the yielded ``HostReads``."""
    reads = HostReads()

    def guard(op: str) -> None:
        if note:
            reads.ops.append(op)
        else:
            refuse(op, name)

    token = set_guard(guard)
    try:
        yield reads
    finally:
        reset_guard(token)
