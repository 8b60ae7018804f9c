"""The error raised for unreadable or mismatched records."""

from __future__ import annotations

from ..errors import EmberError


class RecordError(EmberError, ValueError):
    """A record file is truncated, corrupted, of the wrong kind, or its names don't match."""
