"""The backward entry point: ``ember.autodiff.backward(loss, on_leaf=...)``.

``Tensor.backward()`` calls it without a hook; distributed data parallel calls it with one, to
start a parameter's all-reduce the moment that gradient is complete. Nothing above the tensor core
drives the engine (``engine.run_backward``) directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import AutodiffError, DTypeError
from . import options
from .engine import run_backward
from .gradients import Gradients

if TYPE_CHECKING:
    from .._core.tensor import Tensor

OnLeaf = Callable[[int, Any], None]


def backward(
    loss: Tensor,
    *,
    on_leaf: OnLeaf | None = None,
    gradient: Tensor | None = None,
    retain_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> Gradients:
    """Backpropagate from ``loss`` (a non-scalar is seeded with ones) -> ``Gradients``.

    ``gradient``, ``retain_graph`` and ``inputs`` are those of ``Tensor.backward``.

    ``loss.backward()`` is ``backward(loss)``. ``on_leaf(leaf_id, grad)``, when given, is called
    once per require-grad leaf the pass reaches, as soon as that leaf's gradient is complete
    (every child has contributed) and before the rest of the pass runs. ``leaf_id`` is the key the
    returned ``Gradients`` keeps it under (``ember._core.internal.leaf_id(leaf)``) and ``grad``
    the backend array it stores: the hook reads it, it must not change it. An exception raised by
    the hook ends the pass (the graph is consumed) and propagates.

    Args:
        loss: A tracked tensor.
        on_leaf: Optional callback ``(leaf_id, grad) -> None``.

    Raises:
        DTypeError: ``loss`` is not a Tensor, or ``on_leaf`` is not callable.
        AutodiffError: ``loss`` is untracked, or its graph was consumed or is in use.

    Example:
        >>> x = Tensor.ones((2,), device=Device.cpu().autodiff()).require_grad()
        >>> seen = []
        >>> grads = ember.autodiff.backward(x.sum(), on_leaf=lambda i, g: seen.append(i))
        >>> seen == [leaf_id(x)] and x.grad(grads).tolist() == [1.0, 1.0]
        True
    """
    from .._core.tensor import Tensor  # the tensor core imports this module

    if not isinstance(loss, Tensor):
        raise DTypeError(
            f"backward: expected an em.Tensor loss, got {type(loss).__name__}. Pass the tensor "
            "the forward pass returned."
        )
    if on_leaf is not None and not callable(on_leaf):
        raise DTypeError(
            f"backward: expected on_leaf to be a callable (leaf_id, grad) -> None or None, got "
            f"{type(on_leaf).__name__}."
        )
    return backward_of(loss, on_leaf, gradient, retain_graph, inputs)


def backward_of(
    loss: Tensor,
    on_leaf: OnLeaf | None,
    gradient: Tensor | None = None,
    retain_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> Gradients:
    """``backward`` without the argument checks (``Tensor.backward`` calls it)."""
    node = loss._node
    if node is None:
        what = "a plain tensor" if loss._strategy is None else "an untracked autodiff tensor"
        raise AutodiffError(
            f"backward: expected a tracked tensor, got {what}; nothing upstream requires a "
            "gradient. If the model is in valid() (eval()) mode, for instance after evaluating "
            "or generating, call model.train() before the forward pass; a frozen or no_grad() "
            "model needs unfreeze() or set_require_grad(True). For a bare tensor, call "
            ".autodiff().require_grad() on the source leaf (or create it on an autodiff device)."
        )
    if gradient is None and not retain_graph and inputs is None:
        return run_backward(node, loss._dev.b.ones_like(loss._data), on_leaf)
    seed = (
        loss._dev.b.ones_like(loss._data)
        if gradient is None
        else options.seed_of("backward", loss, gradient)._data
    )
    wanted = None if inputs is None else options.chosen("backward", inputs)
    return run_backward(node, seed, on_leaf, retain=bool(retain_graph), wanted=wanted)
