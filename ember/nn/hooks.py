"""Module forward hooks: ``register_forward_pre_hook`` / ``register_forward_hook``.

A module with no hook pays one attribute read per call (``Module._call_hooks`` is ``None``);
the first registration gives the instance a ``ForwardHooks`` that ``Module.__call__`` hands the
call to. Hooks run in registration order, pre-hooks before ``forward``, hooks after it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .module import Module


class ForwardHooks:
    """The pre-hooks and hooks of one module, and the hooked call."""

    __slots__ = ("post", "pre")

    def __init__(self) -> None:
        self.pre: list[Any] = []
        self.post: list[Any] = []

    def add(self, module: Module, kind: str, hook: Any) -> HookHandle:
        getattr(self, kind).append(hook)
        return HookHandle(module, kind, hook)

    def copy(self) -> ForwardHooks:
        new = ForwardHooks()
        new.pre = list(self.pre)
        new.post = list(self.post)
        return new

    def call(self, module: Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``module.forward(*args, **kwargs)`` with the hooks around it."""
        for hook in list(self.pre):
            new = hook(module, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        out = module.forward(*args, **kwargs)
        for hook in list(self.post):
            new = hook(module, args, out)
            if new is not None:
                out = new
        return out


class HookHandle:
    """What the module ``register_*hook`` calls return; ``remove()`` unregisters (idempotent).
    It holds the module weakly, so a handle never keeps a model alive."""

    __slots__ = ("_hook", "_kind", "_module")

    def __init__(self, module: Module, kind: str, hook: Any) -> None:
        self._module = weakref.ref(module)
        self._kind = kind
        self._hook = hook

    def remove(self) -> None:
        module = self._module()
        hook = self._hook
        self._hook = None
        if module is None or hook is None:
            return
        hooks = module.__dict__.get("_call_hooks")
        if hooks is None:
            return
        held = getattr(hooks, self._kind)
        for i, h in enumerate(held):
            if h is hook:  # this registration only (the same fn may be registered twice)
                del held[i]
                break
        if not hooks.pre and not hooks.post:
            del module.__dict__["_call_hooks"]  # back to the hook-free path

    def __enter__(self) -> HookHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
