"""ember's exception hierarchy.

Every error ember raises subclasses :class:`EmberError`. Messages start with the op, say what was
expected and what was received, and end with a hint.
"""

from __future__ import annotations


class EmberError(Exception):
    """Base class of every error ember raises."""


class AutodiffError(EmberError, RuntimeError):
    """An autodiff precondition failed (untracked loss, consumed graph, mixed strategies...)."""


class ShapeError(EmberError, ValueError):
    """Shapes (or dims, or index ranges) don't fit the op."""


class DTypeError(EmberError, TypeError):
    """The op does not accept a tensor of this dtype."""


class DeviceError(EmberError, RuntimeError):
    """The device is unusable, or operands live on different devices."""
