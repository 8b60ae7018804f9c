"""The ``Gradients`` container returned by ``backward()``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import DTypeError


class Gradients:
    """Gradients of the require-grad leaves one backward pass reached, keyed by node identity.

    Read a leaf's gradient with ``leaf.grad(grads)``; the container holds raw arrays and no graph
    references, so it is cheap to keep and safe to hand to another thread. ``len(grads)`` counts
    the gradients still held. Only ``backward(create_graph=True)`` fills it with tracked tensors
    instead (each with its graph), which ``leaf.grad(grads)`` returns as they are.
    ``backward(inputs=[t, ...])`` fills it with the chosen tensors' gradients only, intermediates
    included: ``t.grad(grads)`` (or ``grads.get(t)``) reads them.
    """

    __slots__ = ("_store", "recomputed")

    def __init__(self) -> None:
        self._store: dict[int, Any] = {}
        # node id -> how many times backward recomputed it (gradient checkpointing statistics)
        self.recomputed: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._store

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._store))

    def get(self, node_id: Any) -> Any:
        """The raw entry under ``node_id``; given a tensor instead, that tensor's gradient as a
        tensor (``t.grad(self)``: a leaf's, or a chosen intermediate's), or ``None``."""
        if type(node_id) is int:
            return self._store.get(node_id)
        grad = getattr(node_id, "grad", None)
        if grad is None or getattr(node_id, "_node", False) is False:
            raise DTypeError(
                f"Gradients.get: expected a node id (int) or an em.Tensor, got "
                f"{type(node_id).__name__}."
            )
        return grad(self)

    def pop(self, node_id: int) -> Any:
        return self._store.pop(node_id, None)

    def put(self, node_id: int, value: Any) -> None:
        self._store[node_id] = value

    def __repr__(self) -> str:
        return f"Gradients({len(self._store)} tensors)"
