"""ember's exception hierarchy.

Every error ember raises subclasses :class:`EmberError`. Messages start with the op, say what was
expected and what was received, and end with a hint.

Which class a bad argument raises:

- :class:`DTypeError` (a ``TypeError``): an argument of the wrong type (a float, ``None`` or a
  string where an int, a shape or a number is expected: ``zeros((2.5,))``, ``permute(None)``,
  ``conv2d(stride=1.5)``, ``em.seed("a")``), a tensor of a dtype the op does not accept, or a
  Python number that the target dtype cannot hold: an int outside int64 (outside int32 for an
  int32 tensor), NaN or infinity for an int or bool tensor, a float beyond the int range.
- :class:`ShapeError` (a ``ValueError``): an argument of the right type with a wrong value:
  shapes, sizes, dims and indices out of range, negative sizes, probabilities outside [0, 1],
  ``em.seed(-1)``, and tensors too large to allocate (the message gives the bytes requested).
"""

from __future__ import annotations


class EmberError(Exception):
    """Base class of every error ember raises."""


class AutodiffError(EmberError, RuntimeError):
    """An autodiff precondition failed (untracked loss, consumed graph, mixed strategies...)."""


class ShapeError(EmberError, ValueError):
    """Shapes, dims, index ranges or other argument values don't fit the op (or memory)."""


class DTypeError(EmberError, TypeError):
    """A wrong argument type, a tensor of the wrong dtype, or a number its dtype cannot hold."""


class DeviceError(EmberError, RuntimeError):
    """The device is unusable, or operands live on different devices."""


class DistributedError(DeviceError):
    """A collective of ``ember.distributed`` failed or timed out: another rank died, raised or
    stopped answering (every rank stops with this error instead of hanging)."""


class CaptureError(EmberError, RuntimeError):
    """A function wrapped by ``em.capture`` does something a recording cannot replay (a host
    read such as ``item()``, a data-dependent shape, an argument it cannot take as an input)."""
