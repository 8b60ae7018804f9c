"""A ``Tensor``'s autodiff context and its gradients (SEMANTICS.md §1-§4, §6).

``ContextMethods`` is a mixin of ``Tensor``: entering and leaving autodiff, require-grad leaves,
``detach``, strategies, ``to_device``, ``backward`` and the ``grad*`` readers of ``Gradients``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..autodiff import hooks as _hooks
from ..autodiff.backprop import backward_of
from ..autodiff.gradients import Gradients
from ..autodiff.node import Node
from ..autodiff.requirement import Requirement
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..errors import AutodiffError, DTypeError, ShapeError
from ..ops import OPS
from .base import TensorBase
from .device import Device
from .dispatch import record, wrap

if TYPE_CHECKING:
    from ..autodiff.hooks import RemovableHandle
    from .tensor import Tensor

_GRAD = Requirement.GRAD
_Strategy = GradientCheckpointingStrategy
_TO_DEVICE = OPS["to_device"]


def _check_gradients(op: str, grads: object) -> None:
    if not isinstance(grads, Gradients):
        hint = (
            " For parameter-keyed gradients use grads.get(param.id)."
            if type(grads).__name__ == "GradientsParams"
            else ""
        )
        raise DTypeError(
            f"{op}: expected the Gradients returned by backward(), got {type(grads).__name__}."
            + hint
        )


def is_autodiff(self: Tensor) -> bool:
    """Associated with autodiff (any dtype)."""
    return self._strategy is not None


def is_tracked(self: Tensor) -> bool:
    """Participates in a graph: a require-grad leaf or computed from one."""
    return self._node is not None


def is_require_grad(self: Tensor) -> bool:
    """A leaf whose gradient backward keeps."""
    n = self._node
    return n is not None and n.requirement is _GRAD


def gradient_checkpointing_strategy(self: Tensor) -> _Strategy | None:
    return self._strategy


def autodiff(self: Tensor) -> Tensor:
    """Plain -> autodiff (strategy ``Disabled``, untracked); autodiff -> unchanged."""
    if self._strategy is not None:
        return self
    return wrap(self.__class__, self._data, self._dev, _Strategy.Disabled)


def without_autodiff(self: Tensor) -> Tensor:
    """Autodiff -> plain tensor with no graph reference; plain -> unchanged."""
    if self._strategy is None:
        return self
    return wrap(self.__class__, self._data, self._dev)


def require_grad(self: Tensor) -> Tensor:
    """Same as ``set_require_grad(True)``."""
    return self.set_require_grad(True)


def set_require_grad(self: Tensor, flag: bool) -> Tensor:
    """Mark an untracked autodiff float leaf as require-grad, or cut a tensor from its history.

    ``True``: untracked autodiff float -> require-grad leaf; a require-grad leaf is unchanged.
    ``False``: autodiff float -> a new untracked tensor (still autodiff); plain -> unchanged.
    """
    dt = self.dtype
    if flag:
        if not dt.is_float:
            raise DTypeError(
                f"set_require_grad: expected a float tensor, got {dt.name}; only float tensors "
                "have gradients. Convert with .float() first."
            )
        if self._strategy is None:
            raise AutodiffError(
                "set_require_grad: expected an autodiff tensor, got a plain one. Call "
                ".autodiff() first (t.autodiff().require_grad()) or create it on an autodiff "
                "device."
            )
        node = self._node
        if node is None:
            leaf = Node.leaf(self._data, self._dev.b)
            return wrap(self.__class__, self._data, self._dev, self._strategy, leaf)
        if node.requirement is _GRAD:
            return self
        raise AutodiffError(
            f"set_require_grad: expected a leaf, got the result of op {node.spec.name!r} "
            "(a tracked non-leaf). For its gradient pass it to backward(inputs=[t]) and read "
            "t.grad(grads); to start a new leaf from its value call .detach() first."
        )
    if self._strategy is None or self._node is None:
        return self
    return wrap(self.__class__, self._data, self._dev, self._strategy)


def detach(self: Tensor) -> Tensor:
    """New lineage: keeps autodiff and a leaf's require-grad; a non-leaf becomes untracked."""
    if self._strategy is None:
        return self
    node = self._node
    if node is not None and node.requirement is _GRAD:
        return wrap(
            self.__class__,
            self._data,
            self._dev,
            self._strategy,
            Node.leaf(self._data, self._dev.b),
        )
    return wrap(self.__class__, self._data, self._dev, self._strategy)


def with_gradient_checkpointing_strategy(self: Tensor, strategy: _Strategy) -> Tensor:
    """The same tensor (same graph) whose later ops record under ``strategy``."""
    if self._strategy is None:
        raise AutodiffError(
            "with_gradient_checkpointing_strategy: expected an autodiff tensor, got a plain "
            "one. Call .autodiff() first."
        )
    if not isinstance(strategy, _Strategy):
        raise AutodiffError(
            "with_gradient_checkpointing_strategy: expected a GradientCheckpointingStrategy, "
            f"got {strategy!r}."
        )
    return wrap(self.__class__, self._data, self._dev, strategy, self._node)


def to_device(self: Tensor, device: Device) -> Tensor:
    """Move to ``device``'s hardware, keeping this tensor's autodiff context.

    A tracked tensor's move is differentiable: gradients flow back to the source device.
    Moving to the same hardware returns an equivalent handle.
    """
    if not isinstance(device, Device):
        raise DTypeError(
            f"to_device: expected an em.Device, got {type(device).__name__}. Pass "
            "em.Device.cpu(), em.Device.torch('cpu') or em.Device.cuda()."
        )
    dst = device._plain
    if dst is self._dev:
        return self
    attrs = {"src": self._dev.b, "dst": dst.b}
    out = dst.b.receive(self._data, self._dev.b)
    if self._strategy is None:
        return wrap(self.__class__, out, dst)
    return record(_TO_DEVICE, (self,), (self._data,), out, attrs, self._strategy, dst)


def backward(
    self: Tensor,
    gradient: Tensor | None = None,
    *,
    retain_graph: bool = False,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> Gradients:
    """Backpropagate from this tensor -> ``Gradients`` (SEMANTICS.md §3).

    Args:
        gradient: The gradient of this tensor (same shape), as PyTorch's ``gradient=``; by
            default ones (a non-scalar then behaves like its sum).
        retain_graph: Leave the graph unconsumed, so a later backward can run through it again
            (saved values are kept until the graph's tensors are dropped). Without it a second
            backward through the same graph raises ``AutodiffError`` ("already consumed").
        create_graph: Record the backward itself: the gradients are tracked tensors of a new
            graph on the same leaves, and this graph is left unconsumed (SEMANTICS.md §13).
        inputs: Tracked tensors (leaves or intermediates) whose gradients the result holds,
            and only those, as PyTorch's ``inputs=``; read each with ``t.grad(grads)``. Only
            the steps that lead to them run.

    Gradient hooks (``register_hook``) run on each gradient as it arrives.
    """
    if create_graph:
        from ..autodiff.higher import backward_graph  # the recorded pass builds on the core

        return backward_graph(self, gradient, inputs)
    if gradient is None and not retain_graph and inputs is None:
        return backward_of(self, None)  # ember.autodiff.backward(self), less its checks
    return backward_of(self, None, gradient, retain_graph, inputs)


def register_hook(self: Tensor, fn: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    """Run ``fn(grad)`` on the gradient that arrives at this tracked tensor in each later
    backward pass (leaf or intermediate); a returned tensor (same shape) replaces the gradient,
    ``None`` keeps it. Returns a handle whose ``remove()`` unregisters ``fn``.

    Example:
        >>> x = em.Tensor.ones((2,), device=em.Device.cpu().autodiff()).require_grad()
        >>> h = x.register_hook(lambda g: g * 2.0)
        >>> x.grad(x.sum().backward()).tolist()
        [2.0, 2.0]
        >>> h.remove()
    """
    return _hooks.register(self, fn)


def grad(self: Tensor, grads: Gradients) -> Tensor | None:
    """This require-grad leaf's gradient in ``grads`` (or an intermediate's that
    ``backward(inputs=...)`` chose), or ``None``: a plain tensor (a tracked one when ``grads``
    came from ``backward(create_graph=True)``)."""
    if not isinstance(grads, Gradients):
        _check_gradients("grad", grads)
    n = self._node
    if n is None:
        return None
    g = grads.get(n.id)  # an intermediate's only when backward(inputs=...) chose it
    if g is None:
        return None
    if isinstance(g, TensorBase):  # a tracked gradient of backward(create_graph=True)
        return g  # type: ignore[return-value]
    return wrap(self.__class__, g, self._dev)


def grad_remove(self: Tensor, grads: Gradients) -> Tensor | None:
    """Pop this leaf's gradient from ``grads`` (``None`` if absent)."""
    if not isinstance(grads, Gradients):
        _check_gradients("grad_remove", grads)
    n = self._node
    if n is None:
        return None
    g = grads.pop(n.id)
    if isinstance(g, TensorBase):  # a tracked gradient of backward(create_graph=True)
        return g  # type: ignore[return-value]
    return None if g is None else wrap(self.__class__, g, self._dev)


def grad_replace(self: Tensor, grads: Gradients, grad: Tensor) -> None:
    """Set this leaf's entry in ``grads`` to the plain tensor ``grad``."""
    if not isinstance(grads, Gradients):
        _check_gradients("grad_replace", grads)
    if self._strategy is None:
        raise AutodiffError(
            "grad_replace: expected an autodiff tensor, got a plain one; plain tensors have no "
            "gradient entries."
        )
    if grad.is_autodiff():
        raise AutodiffError(
            "grad_replace: expected a plain gradient, got an autodiff tensor. Pass "
            "grad.without_autodiff()."
        )
    n = self._node
    if n is None or n.requirement is not _GRAD:
        raise AutodiffError(
            "grad_replace: expected a require-grad leaf, got a tensor whose gradient is not "
            "kept. Call .require_grad() on the leaf before the forward pass."
        )
    if grad.shape != self.shape:
        raise ShapeError(
            f"grad_replace: expected a gradient of shape {self.shape}, got {grad.shape}."
        )
    grads.put(n.id, grad.to_device(self._dev)._data)


class ContextMethods:
    """Autodiff context, lineage and gradients of a tensor."""

    __slots__ = ()

    is_autodiff = is_autodiff
    is_tracked = is_tracked
    is_require_grad = is_require_grad
    gradient_checkpointing_strategy = gradient_checkpointing_strategy
    autodiff = autodiff
    without_autodiff = without_autodiff
    inner = without_autodiff
    require_grad = require_grad
    set_require_grad = set_require_grad
    detach = detach
    with_gradient_checkpointing_strategy = with_gradient_checkpointing_strategy
    to_device = to_device
    backward = backward
    register_hook = register_hook
    grad = grad
    grad_remove = grad_remove
    grad_replace = grad_replace
