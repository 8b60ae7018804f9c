"""Gradient hooks: ``Tensor.register_hook(fn)`` and the handle that removes one.

A hook lives on the tensor's graph node (``Node.hooks``), so every handle of that node (aliases,
``with_gradient_checkpointing_strategy``) shares it and it dies with the graph. Both backward
passes (``engine`` and the recorded one of ``higher``) call ``fire`` with a node's complete
gradient before they use it: a leaf's before it is stored, an intermediate's before its step.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import AutodiffError, DTypeError, ShapeError
from .node import Node

if TYPE_CHECKING:
    from .._core.tensor import Tensor

Hook = Callable[["Tensor"], "Tensor | None"]


class RemovableHandle:
    """What ``register_hook`` returns; ``remove()`` unregisters the hook (idempotent)."""

    __slots__ = ("_entry", "_node")

    def __init__(self, node: Node, entry: tuple[Hook, Any]) -> None:
        self._node = weakref.ref(node)
        self._entry = entry

    def remove(self) -> None:
        """Unregister the hook; later backward passes no longer call it."""
        node = self._node()
        if node is None or node.hooks is None:
            return
        hooks = [e for e in node.hooks if e is not self._entry]
        node.hooks = hooks or None

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def register(t: Tensor, fn: Hook) -> RemovableHandle:
    """Attach ``fn`` to ``t``'s node: ``fn(grad) -> Tensor | None`` runs on the gradient that
    arrives at ``t`` during each later backward pass (``None`` keeps it)."""
    if not callable(fn):
        raise DTypeError(
            f"register_hook: expected a callable fn(grad) -> Tensor | None, got "
            f"{type(fn).__name__}."
        )
    node = t._node
    if node is None:
        what = "a plain tensor" if t._strategy is None else "an untracked autodiff tensor"
        raise AutodiffError(
            f"register_hook: expected a tracked tensor (a require-grad leaf or a result computed "
            f"from one), got {what}; no gradient ever arrives at it. Call .require_grad() on the "
            "source leaf (on an autodiff device) before the forward pass."
        )
    entry = (fn, t._dev)
    node.hooks = [*node.hooks, entry] if node.hooks is not None else [entry]
    return RemovableHandle(node, entry)


def fire(node: Node, grad: Any, recorded: bool) -> Any:
    """``grad`` (a raw array, or a tensor when ``recorded``) after ``node``'s hooks ran on it."""
    from .._core.dispatch import wrap
    from .._core.tensor import Tensor

    hooks = node.hooks
    assert hooks is not None
    for fn, dev in list(hooks):
        t = grad if recorded else wrap(Tensor, grad, dev)
        new = fn(t)
        if new is None:
            continue
        if not isinstance(new, Tensor):
            raise DTypeError(
                f"register_hook: expected the hook {_name(fn)} to return a Tensor or None, got "
                f"{type(new).__name__}."
            )
        if tuple(new.shape) != tuple(t.shape):
            raise ShapeError(
                f"register_hook: expected the hook {_name(fn)} to return a gradient of shape "
                f"{tuple(t.shape)} (the tensor's), got {tuple(new.shape)}. Return a tensor of "
                "the gradient's shape, or None to keep it."
            )
        if new.dtype is not t.dtype:
            new = new.cast(t.dtype)
        if new._dev is not dev:
            new = new.to_device(dev)
        grad = new if recorded else new._data
    return grad


def _name(fn: Any) -> str:
    return repr(getattr(fn, "__qualname__", type(fn).__name__))
