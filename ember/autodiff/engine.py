"""The backward pass (SEMANTICS.md §3 and §7).

``run_backward`` walks the graph reachable from the root once to check that no step it needs was
consumed (before touching anything), counts each node's children, then runs the steps in reverse
topological order (Kahn's algorithm: a node runs once every child has handed it its gradient).
Intermediate gradients and saved values are released as soon as their step ran.

Nodes recorded under ``Balanced`` keep no copies of their tracked inputs; a step fetches them from
the parents: a kept output, or a value recomputed from the nearest kept ancestors. Each recomputed
value is computed once, cached, and dropped after its last counted use.
"""

from __future__ import annotations

from typing import Any

from ..errors import AutodiffError
from ..ops.registry import run_forward
from .gradients import Gradients
from .node import Node
from .requirement import Requirement

_GRAD = Requirement.GRAD


def _consumed_error(node: Node) -> AutodiffError:
    name = node.spec.name if node.spec is not None else "leaf"
    return AutodiffError(
        f"backward: the graph was already consumed (op {name!r} ran its backward step in an "
        "earlier pass). Expected a graph built by a fresh forward; got one that backward already "
        "went through. Recompute the forward pass before calling backward() again."
    )


def run_backward(root: Node, seed: Any) -> Gradients:
    """Backpropagate ``seed`` (the root's gradient) and return the kept leaf gradients."""
    # 1. discover the subgraph, count children, reject consumed steps before changing anything
    children: dict[Node, int] = {}
    stack = [root]
    balanced = False
    while stack:
        n = stack.pop()
        if n.consumed:
            raise _consumed_error(n)
        if n.balanced:
            balanced = True
        for p in n.parents:
            if p is not None:
                c = children.get(p)
                if c is None:
                    children[p] = 1
                    stack.append(p)
                else:
                    children[p] = c + 1
    rec = _Recompute(children, root) if balanced else None
    out = Gradients()
    store = out._store

    # 2. run the steps, each once, in reverse topological order
    grads: dict[Node, Any] = {root: seed}
    pop = grads.pop
    ready = [root]
    while ready:
        n = ready.pop()
        g = pop(n, None)
        spec = n.spec
        if spec is None:
            if g is not None and n.requirement is _GRAD:
                store[n.id] = g
            continue
        parents = n.parents
        in_grads = None
        if g is not None:
            if rec is not None and n.balanced:
                in_grads = rec.step(n, g)
            else:
                in_grads = spec.backward(n, g)
        elif rec is not None:
            rec.skip(n)
        n.consumed = True
        n.inputs = None
        n.output = None
        i = 0
        for p in parents:
            if p is not None:
                if in_grads is not None:
                    gi = in_grads[i]
                    if gi is not None:
                        shape = n.shapes[i]
                        if gi.shape != shape:
                            gi = n.b.sum_to_shape(gi, shape)
                        prev = grads.get(p)
                        grads[p] = gi if prev is None else prev + gi
                c = children[p] - 1
                if c:
                    children[p] = c
                else:
                    ready.append(p)
            i += 1
    if rec is not None:
        out.recomputed = rec.counts
    return out


class _Recompute:
    """Values of ``Balanced`` nodes during one backward: kept outputs or recomputed ones."""

    __slots__ = ("cache", "counts", "uses")

    def __init__(self, children: dict[Node, int], root: Node) -> None:
        nodes = [root, *children]
        self.cache: dict[Node, Any] = {}
        self.counts: dict[int, int] = {}
        # how often each node's value will still be asked for in this pass
        uses: dict[Node, int] = {}
        for c in nodes:
            spec = c.spec
            if spec is None or not c.balanced:
                continue
            if c.recipe:
                for p in c.parents:
                    if p is not None:
                        uses[p] = uses.get(p, 0) + 1
                if spec.saves_output:
                    uses[c] = uses.get(c, 0) + 1
            if spec.saves_inputs:
                for p in c.parents:
                    if p is not None:
                        uses[p] = uses.get(p, 0) + 1
        self.uses = uses

    def _release(self, n: Node) -> None:
        u = self.uses.get(n, 0) - 1
        self.uses[n] = u
        if u <= 0:
            self.cache.pop(n, None)

    def value(self, n: Node) -> Any:
        """``n``'s output, recomputing missing ancestors iteratively (no recursion limit)."""
        if n.output is not None:
            return n.output
        v = self.cache.get(n)
        if v is not None:
            return v
        cache = self.cache
        stack = [n]
        while stack:
            m = stack[-1]
            if m in cache:
                stack.pop()
                continue
            missing = [
                p for p in m.parents if p is not None and p.output is None and p not in cache
            ]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            args = []
            for p in m.parents:
                assert p is not None  # recipe nodes have only tracked parents
                args.append(p.output if p.output is not None else cache[p])
            cache[m] = run_forward(m.b, m.spec, args, m.attrs)
            self.counts[m.id] = self.counts.get(m.id, 0) + 1
            for p in m.parents:
                if p is not None:
                    self._release(p)
            m.recipe = False  # its parents' claims for this recompute are settled
        return cache[n]

    def step(self, n: Node, g: Any) -> Any:
        spec = n.spec
        saved = n.inputs
        if spec.saves_inputs:
            vals = []
            for i, p in enumerate(n.parents):
                v = saved[i] if saved is not None else None
                if v is None and p is not None:
                    v = self.value(p)
                    self._release(p)
                vals.append(v)
            n.inputs = tuple(vals)
        if spec.saves_output and n.output is None:
            n.output = self.value(n)
            self._release(n)
        result = spec.backward(n, g)
        self.skip(n)
        return result

    def skip(self, n: Node) -> None:
        """``n``'s step is over: settle claims it still holds and drop its cached value."""
        if n.recipe:  # never recomputed: its recompute claims on the parents lapse
            for p in n.parents:
                if p is not None:
                    self._release(p)
        self.cache.pop(n, None)
