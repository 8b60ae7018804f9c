"""The error raised for unreadable or mismatched records, and the warning for unchecked ones."""

from __future__ import annotations

from ..errors import EmberError


class RecordError(EmberError, ValueError):
    """A record file is truncated, corrupted, of the wrong kind, or its names don't match."""


class RecordWarning(UserWarning):
    """A record loaded without a damage check: the file carries no ``checksum`` field (written
    by an ember older than checksums, or by another tool)."""
