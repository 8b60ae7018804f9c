"""What a graph holds before backward: bytes kept per op, under either checkpointing strategy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._core.tensor import Tensor
    from ..autodiff.node import Node

CONSTANT = "constant"  # untracked inputs saved by a node: data, dropout masks, plain operands
LEAF = "leaf"


@dataclass(frozen=True)
class MemoryReport:
    """Memory a tensor's graph keeps alive for its backward pass.

    Each buffer is counted once, however many nodes hold it (a NumPy view counts as its base
    array, a PyTorch tensor as its storage), and is attributed to the op that produced it.

    Attributes:
        total_bytes: Bytes of saved activations and constants: what backward needs beyond the
            require-grad leaves.
        by_op: ``total_bytes`` split by the producing op's name, largest first; ``"constant"``
            collects untracked inputs a node saved (input data, dropout masks, plain operands).
        leaf_bytes: Bytes of require-grad leaves (parameters) the graph references; their owners
            usually hold them anyway, so they are not in ``total_bytes``.
        num_nodes: Op nodes whose backward step is still pending (leaves excluded).
        num_recipes: Of those, nodes recorded under ``Balanced`` that keep only a recipe.
    """

    total_bytes: int
    by_op: dict[str, int] = field(default_factory=dict)
    leaf_bytes: int = 0
    num_nodes: int = 0
    num_recipes: int = 0

    def __str__(self) -> str:
        lines = [
            f"graph keeps {_fmt(self.total_bytes)} for backward "
            f"({self.num_nodes} op nodes, {self.num_recipes} of them recipes; "
            f"leaves {_fmt(self.leaf_bytes)} not included)"
        ]
        for name, n in self.by_op.items():
            share = 100.0 * n / self.total_bytes if self.total_bytes else 0.0
            lines.append(f"  {name:<16} {_fmt(n):>10}  {share:5.1f}%")
        return "\n".join(lines)


def _fmt(n: int) -> str:
    v = float(n)
    for unit in ("B", "KiB", "MiB"):
        if v < 1024.0:
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024.0
    return f"{v:.2f} GiB"


def _buffer(a: Any) -> tuple[tuple[str, int], int]:
    """(identity, bytes) of the memory block behind raw array ``a``."""
    storage = getattr(a, "untyped_storage", None)
    if storage is not None:  # a torch tensor: views share one storage
        s = storage()
        return ("storage", s.data_ptr()), int(s.nbytes())
    base = a
    while getattr(base, "base", None) is not None:  # a NumPy view keeps its base alive
        base = base.base
    return ("object", id(base)), int(getattr(base, "nbytes", 0))


def _held(n: Node) -> Iterator[tuple[str, Any]]:
    """(producer name, raw array) for each value node ``n`` keeps (residuals are its own op's)."""
    if n.output is not None:
        yield (LEAF if n.spec is None else n.spec.name), n.output
    saved = n.saved
    if saved is not None:
        name = n.spec.name if n.spec is not None else LEAF
        for v in saved if type(saved) is tuple else (saved,):
            yield name, v
    if n.inputs is not None:
        for p, v in zip(n.parents, n.inputs):
            if v is None:
                continue
            if p is None:
                yield CONSTANT, v
            else:
                yield (LEAF if p.spec is None else p.spec.name), v


def report(tensor: Tensor) -> MemoryReport:
    """Bytes the graph behind ``tensor`` keeps for its backward, in total and per op name.

    Call it on a loss before ``backward()`` to see what ``Balanced`` saves against
    ``Disabled``: under ``Balanced``, memory-bound ops keep only a recipe, so their names
    disappear from ``by_op`` (or shrink to the values a compute-bound op still needs).
    Consumed parts of the graph (already backpropagated) hold nothing and are skipped.

    Args:
        tensor: Any tensor; a plain or untracked one gives an empty report.

    Returns:
        A ``MemoryReport``; ``print(report)`` shows a table sorted by size.

    Example:
        >>> dev = em.Device.cpu().autodiff().gradient_checkpointing()
        >>> w = em.Tensor.ones((256, 256), device=dev).require_grad()
        >>> loss = (w @ w).tanh().exp().sum()
        >>> r = em.checkpoint.report(loss)
        >>> r.by_op
        {'matmul': 262144, 'sum': 4}
    """
    root = getattr(tensor, "_node", None)
    if root is None:
        return MemoryReport(0)
    by_op: dict[str, int] = {}
    seen_buffers: set[tuple[str, int]] = set()
    leaf_bytes = 0
    num_nodes = 0
    num_recipes = 0
    seen = {root}
    stack = [root]
    while stack:  # iterative: graphs may be tens of thousands of nodes deep
        n = stack.pop()
        if n.spec is not None:
            if n.consumed:
                continue
            num_nodes += 1
            if n.recipe:
                num_recipes += 1
        for name, value in _held(n):
            key, nbytes = _buffer(value)
            if key in seen_buffers:
                continue
            seen_buffers.add(key)
            if name == LEAF:
                leaf_bytes += nbytes
            else:
                by_op[name] = by_op.get(name, 0) + nbytes
        for p in n.parents:
            if p is not None and p not in seen:
                seen.add(p)
                stack.append(p)
    by_op = dict(sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0])))
    return MemoryReport(sum(by_op.values()), by_op, leaf_bytes, num_nodes, num_recipes)
