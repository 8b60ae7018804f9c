"""What a graph holds before backward: bytes kept per op, and per op how many nodes keep their
values, keep a recipe or were dropped by a budget, and what recomputing them costs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING, Any

from .cost import recompute_cost

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
        num_recipes: Of those, nodes that keep only a recipe (``Balanced``'s memory-bound ops,
            values a budget dropped, values no rule reads under a budget).
        num_dropped: Of the recipes, values a memory budget dropped to stay under it.
        ops: Per op name, ``OpCounts``: nodes kept / recipes / dropped, and the estimated cost
            of recomputing its recipes once (``ember.checkpoint.cost``; flop-equivalents).
        budget_bytes: The budget in bytes, for a graph recorded under one (else ``None``).
    """

    total_bytes: int
    by_op: dict[str, int] = field(default_factory=dict)
    leaf_bytes: int = 0
    num_nodes: int = 0
    num_recipes: int = 0
    num_dropped: int = 0
    ops: dict[str, OpCounts] = field(default_factory=dict)
    budget_bytes: int | None = None

    def __str__(self) -> str:
        budget = f", budget {_fmt(self.budget_bytes)}" if self.budget_bytes is not None else ""
        lines = [
            f"graph keeps {_fmt(self.total_bytes)} for backward "
            f"({self.num_nodes} op nodes, {self.num_recipes} of them recipes, "
            f"{self.num_dropped} dropped by the budget{budget}; "
            f"leaves {_fmt(self.leaf_bytes)} not included)",
            f"  {'op':<22} {'held':>10}  {'share':>6} {'kept':>6} {'recipe':>6} {'dropped':>7}"
            f" {'recompute':>10}",
        ]
        names = list(self.by_op) + sorted(set(self.ops) - set(self.by_op))
        for name in names:
            n = self.by_op.get(name, 0)
            share = 100.0 * n / self.total_bytes if self.total_bytes else 0.0
            c = self.ops.get(name, OpCounts())
            lines.append(
                f"  {name:<22} {_fmt(n):>10}  {share:5.1f}% {c.kept:>6} {c.recipes:>6} "
                f"{c.dropped:>7} {_flops(c.recompute_cost):>10}"
            )
        return "\n".join(lines)


@dataclass
class OpCounts:
    """One op name's nodes in a graph: ``kept`` (values kept), ``recipes`` (recomputed when a
    backward step reads them), ``dropped`` (of the recipes, dropped by a budget) and
    ``recompute_cost`` (estimated flop-equivalents to recompute all its recipes once)."""

    kept: int = 0
    recipes: int = 0
    dropped: int = 0
    recompute_cost: float = 0.0


def _flops(c: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if c < 1000.0:
            return f"{c:.0f}{unit}" if not unit else f"{c:.1f}{unit}"
        c /= 1000.0
    return f"{c:.1f}P"


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
    ops: dict[str, OpCounts] = {}
    seen_buffers: set[tuple[str, int]] = set()
    leaf_bytes = 0
    num_nodes = 0
    num_recipes = 0
    num_dropped = 0
    children: dict[Node, int] = {}
    seen = {root}
    stack = [root]
    while stack:  # iterative: graphs may be tens of thousands of nodes deep
        n = stack.pop()
        if n.spec is not None:
            if n.consumed:
                continue
            num_nodes += 1
            c = ops.get(n.spec.name)
            if c is None:
                c = ops[n.spec.name] = OpCounts()
            if n.recipe:
                num_recipes += 1
                c.recipes += 1
                if getattr(n, "dropped", False):
                    num_dropped += 1
                    c.dropped += 1
            else:
                c.kept += 1
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
            if p is not None:
                children[p] = children.get(p, 0) + 1
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
    if num_recipes:  # what one backward would recompute, and its estimated cost
        needed, _ = plan(children, root)
        for n in needed:
            if n.recipe and n.spec is not None:
                ops[n.spec.name].recompute_cost += _cost(n)
    by_op = dict(sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0])))
    ledger = ledger_of(root)
    return MemoryReport(
        sum(by_op.values()),
        by_op,
        leaf_bytes,
        num_nodes,
        num_recipes,
        num_dropped,
        ops,
        ledger.limit if ledger is not None else None,
    )


def _cost(n: Node) -> float:
    """A recipe's estimated recompute cost (a budget node carries it; else from its shapes,
    the output taken as large as its largest input)."""
    c = getattr(n, "cost", None)
    if c is not None:
        return float(c)
    shapes = n.shapes
    out = max(shapes, key=prod) if shapes else ()
    return recompute_cost(n.spec, shapes, out, n.attrs, n.b)


from .budget import ledger_of  # noqa: E402  (budget.py reads _buffer and _fmt from here)
from .recompute import plan  # noqa: E402
