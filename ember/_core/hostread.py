"""The host-read guard: ``em.capture`` forbids reading device values on the host inside the
function it records, because a replay never runs the Python that would read them.

The guard is a context variable (per thread and task, as the autocast policy). The core's
host-read entry points (``Tensor.to_numpy`` and ``Tensor.item``, which ``tolist``, ``__array__``,
``bool()``, ``float()``, ``int()``, ``repr`` and index tensors go through) call ``host_read(op)``;
``ember._capture`` sets the guard around the wrapped function. Outside a capture the check is one
``ContextVar.get``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextvars import ContextVar, Token

from ..errors import CaptureError

# None: no capture active. Otherwise a callable told of each host read (op name); it raises
# CaptureError (the default) or notes the read (``fallback=True``: the call then stays eager).
_GUARD: ContextVar[Callable[[str], None] | None] = ContextVar("ember_host_read_guard", default=None)


def host_read(op: str) -> None:
    """Called by the core before a value is read back to the host; tells the active guard."""
    guard = _GUARD.get()
    if guard is not None:
        guard(op)


def set_guard(guard: Callable[[str], None] | None) -> Token[Callable[[str], None] | None]:
    """Install ``guard`` (``None``: reads allowed) for this context; returns the reset token."""
    return _GUARD.set(guard)


def reset_guard(token: Token[Callable[[str], None] | None]) -> None:
    _GUARD.reset(token)


def user_frame() -> str:
    """``file:line`` of the innermost caller outside ember (where the host read was written)."""
    import ember

    root = ember.__path__[0]
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(root):
        f = f.f_back  # type: ignore[assignment]
    return "<unknown>" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def refuse(op: str, name: str) -> None:
    """The default guard's action: ``CaptureError`` naming the op, where, and the ways out."""
    raise CaptureError(
        f"capture: {op} reads a device value on the host inside the captured function {name} "
        f"(at {user_frame()}); a replay never runs that Python, so it cannot be captured. "
        "Return the tensor from the function and read it after the call, keep the value on the "
        "device (tensor ops instead of Python branches), or pass fallback=True to run this "
        "function eagerly."
    )
