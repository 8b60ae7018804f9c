"""Backward options shared by both passes: the chosen nodes of ``backward(inputs=...)``, the
seed of ``backward(gradient=...)``, and the nodes whose steps reach a chosen one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import AutodiffError, DeviceError, DTypeError, ShapeError
from .node import Node

if TYPE_CHECKING:
    from .._core.tensor import Tensor


def reaching(root: Node, wanted: set[Node]) -> set[Node]:
    """The nodes reachable from ``root`` from which some node of ``wanted`` is reached through
    parents (``wanted`` included): the only steps a pass for those gradients must run."""
    keep: set[Node] = set()
    done: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:  # iterative post-order: a node is settled after all its parents
        n, expanded = stack.pop()
        if expanded:
            if n in wanted or any(p in keep for p in n.parents if p is not None):
                keep.add(n)
            done.add(n)
            continue
        if n in done:
            continue
        stack.append((n, True))
        for p in n.parents:
            if p is not None and p not in done:
                stack.append((p, False))
    return keep


def chosen(op: str, inputs: Any) -> set[Node]:
    """The nodes of ``inputs`` (a tensor or a sequence of tracked tensors)."""
    from .._core.tensor import Tensor

    items: Iterable[Any] = (inputs,) if isinstance(inputs, Tensor) else inputs
    try:
        items = list(items)
    except TypeError:
        raise DTypeError(
            f"{op}: expected inputs= to be a tensor or a list of tensors, got "
            f"{type(inputs).__name__}."
        ) from None
    if not items:
        raise AutodiffError(
            f"{op}: expected inputs= to name at least one tensor, got an empty sequence. "
            "Leave inputs out to get every require-grad leaf's gradient."
        )
    nodes: set[Node] = set()
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise DTypeError(
                f"{op}: expected inputs[{i}] to be an em.Tensor, got {type(t).__name__}."
            )
        if t._node is None:
            raise AutodiffError(
                f"{op}: expected inputs[{i}] to be a tracked tensor (a require-grad leaf or a "
                "result computed from one), got an untracked one; it has no gradient. Pass "
                "tensors of the graph that leads to the loss."
            )
        nodes.add(t._node)
    return nodes


def seed_of(op: str, loss: Tensor, gradient: Any) -> Tensor:
    """``gradient`` checked against ``loss`` (same shape, hardware; cast to its dtype)."""
    from .._core.tensor import Tensor

    if not isinstance(gradient, Tensor):
        raise DTypeError(
            f"{op}: expected gradient= to be an em.Tensor of shape {tuple(loss.shape)}, got "
            f"{type(gradient).__name__}. Wrap it with em.tensor(..., device=loss.device)."
        )
    if tuple(gradient.shape) != tuple(loss.shape):
        raise ShapeError(
            f"{op}: expected gradient= of the output's shape {tuple(loss.shape)}, got "
            f"{tuple(gradient.shape)}. Pass one value per element of the output."
        )
    if not gradient.dtype.is_float:
        raise DTypeError(
            f"{op}: expected a float gradient=, got {gradient.dtype.name}. Convert with .float()."
        )
    if gradient._dev is not loss._dev:
        raise DeviceError(
            f"{op}: expected gradient= on the output's device {loss._dev!r}, got one on "
            f"{gradient._dev!r}. Move it with gradient.to_device(loss.device)."
        )
    if gradient.dtype is not loss.dtype:
        gradient = gradient.cast(loss.dtype)
    return gradient
