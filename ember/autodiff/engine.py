"""The backward pass (SEMANTICS.md §3 and §7).

``run_backward`` walks the graph reachable from the root once to claim every step it needs and
check that none was consumed (before touching anything), counts each node's children, then runs the
steps in reverse topological order (Kahn's algorithm: a node runs once every child has handed it its
gradient). Intermediate gradients and saved values are released as soon as their step ran.

Claims make a pass atomic without a lock: each op node is claimed with one ``dict.setdefault`` on
``_claims`` (a single atomic step under the GIL, as on free-threaded builds), so when two threads
run backward through the same graph, exactly one gets every claim. The other finds a node taken (or,
once the pass ended, consumed), gives back the claims it took and raises ``AutodiffError`` before
changing anything. Independent graphs touch disjoint keys and never wait for each other.

Nodes recorded under ``Balanced`` keep no copies of their tracked inputs; a step fetches them from
the parents: a kept output, or a value recomputed from the nearest kept ancestors. Each recomputed
value is computed once, cached, and dropped after its last counted use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import AutodiffError
from ..ops.registry import run_forward
from ..ops.slicegrad import SliceGrad
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


_claims: dict[Node, object] = {}  # op node -> token of the pass that is running through it


def _busy_error(node: Node) -> AutodiffError:
    return AutodiffError(
        f"backward: another backward() is running through this graph right now (op "
        f"{node.spec.name!r} is claimed by it). Expected one backward per graph; got two at once. "
        "Nothing was changed: run backward() once per forward pass (one forward per thread)."
    )


def _release(claimed: list[Node]) -> None:
    claims = _claims
    for n in claimed:
        del claims[n]


def run_backward(
    root: Node, seed: Any, on_leaf: Callable[[int, Any], None] | None = None
) -> Gradients:
    """Backpropagate ``seed`` (the root's gradient) and return the kept leaf gradients.

    ``on_leaf(node_id, grad)``, when given, is called as soon as a require-grad leaf's gradient
    is complete (every child has contributed), before the rest of the pass runs; distributed
    data parallel starts that parameter's all-reduce there.
    """
    # 1. discover the subgraph and count children; claim each op node, then reject a consumed one
    # (a pass marks its nodes consumed before it releases them), all before changing anything
    children: dict[Node, int] = {}
    stack = [root]
    balanced = False
    token = object()
    claim = _claims.setdefault
    claimed: list[Node] = []
    while stack:
        n = stack.pop()
        if n.spec is not None:  # leaves are never consumed: any number of passes share them
            if claim(n, token) is not token:
                _release(claimed)
                raise _busy_error(n)
            claimed.append(n)
            if n.consumed:
                _release(claimed)
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
    try:
        return _run(root, seed, on_leaf, children, balanced)
    finally:
        _release(claimed)


def _run(
    root: Node,
    seed: Any,
    on_leaf: Callable[[int, Any], None] | None,
    children: dict[Node, int],
    balanced: bool,
) -> Gradients:
    """Step 2 of ``run_backward``: the claimed pass itself."""
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
        if type(g) is SliceGrad:
            g = g.dense()
        spec = n.spec
        if spec is None:
            if g is not None and n.requirement is _GRAD:
                v = n.output  # a leaf keeps its value
                if v is not None and g.dtype != v.dtype:
                    # NumPy computes some bfloat16 products in float32: give the leaf's dtype back
                    g = n.b.cast(g, n.b.dtype_of(v))
                store[n.id] = g
                if on_leaf is not None:
                    on_leaf(n.id, g)
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
        if len(parents) == 1 and (p := parents[0]) is not None:  # common: one tracked input
            if in_grads is not None:
                gi = in_grads[0]
                if gi is not None:
                    if gi.shape != n.shapes[0]:
                        gi = n.b.sum_to_shape(gi, n.shapes[0])
                    prev = grads.get(p)
                    grads[p] = gi if prev is None else prev + gi
            c = children[p] - 1
            if c:
                children[p] = c
            else:
                ready.append(p)
            continue
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
    """Values of ``Balanced`` nodes during one backward: held inputs, leaves or recomputed ones.

    A ``Balanced`` node holds the raw inputs it reads that come from ordinary (compute-bound)
    nodes; an input from a recipe node (or a leaf) is ``None`` in ``node.inputs`` and fetched
    here. Built once per pass from the nodes the pass will run. A planning walk (children
    before parents) finds which recipe nodes' values will actually be asked for (``needed``)
    and counts, per node, the claims on its value: each fetch by a child's step, each recompute
    of a needed recipe child, and a recipe node's own step when its rule reads its output. A
    recomputed value is cached and dropped when its last claim is settled, so it is computed
    once per pass and released right after its last use. Recomputation walks the graph with an
    explicit stack, so deep chains hit no recursion limit.
    """

    __slots__ = ("cache", "counts", "needed", "uses")

    def __init__(self, children: dict[Node, int], root: Node) -> None:
        self.cache: dict[Node, Any] = {}
        self.counts: dict[int, int] = {}  # node id -> times recomputed in this pass
        uses: dict[Node, int] = {}
        needed: set[Node] = set()
        # Kahn order from the root: a node comes after all of its children, so whether its value
        # is needed is settled by the time it is reached
        pending = dict(children)
        ready = [root]
        while ready:
            c = ready.pop()
            parents = c.parents
            for p in parents:
                if p is not None:
                    k = pending[p] - 1
                    if k:
                        pending[p] = k
                    else:
                        ready.append(p)
            spec = c.spec
            if spec is None or not c.balanced:
                continue
            if c.recipe:
                if spec.saves_output:
                    needed.add(c)
                    uses[c] = uses.get(c, 0) + 1
                if c in needed:  # recomputing c reads each parent it does not hold once
                    for p in _fetched(c):
                        needed.add(p)
                        uses[p] = uses.get(p, 0) + 1
            if spec.saves_inputs:
                for p in _fetched(c):
                    needed.add(p)
                    uses[p] = uses.get(p, 0) + 1
        self.uses = uses
        self.needed = needed

    def _release(self, n: Node) -> None:
        u = self.uses.get(n, 0) - 1
        self.uses[n] = u
        if u <= 0:
            self.cache.pop(n, None)

    def value(self, n: Node) -> Any:
        """``n``'s output: kept, cached, or recomputed with its missing ancestors (iteratively)."""
        out = n.output
        if out is not None:
            return out
        cache = self.cache
        v = cache.get(n)
        if v is not None:
            return v
        counts = self.counts
        stack = [n]
        while stack:
            m = stack[-1]
            if m in cache:
                stack.pop()
                continue
            args = []
            missing = False
            held: tuple[Any, ...] = m.inputs  # type: ignore[assignment]  # a recipe holds a tuple
            parents: tuple[Node, ...] = m.parents  # type: ignore[assignment]  # recipe: all tracked
            for i, p in enumerate(parents):
                a = held[i]
                if a is None:
                    a = p.output
                    if a is None:
                        a = cache.get(p)
                        if a is None:
                            stack.append(p)
                            missing = True
                args.append(a)
            if missing:
                continue
            stack.pop()
            b = m.b
            out = run_forward(b, m.spec, args, m.attrs)
            if type(out) is not b.array_type:
                out = b.asarray(out)
            cache[m] = out
            counts[m.id] = counts.get(m.id, 0) + 1
            if m in self.needed:  # settle the claims this recompute held on its parents
                for p in _fetched(m):
                    self._release(p)
        return cache[n]

    def step(self, n: Node, g: Any) -> Any:
        """Run ``n``'s backward rule on fetched values, then settle its claims."""
        spec = n.spec
        held = n.inputs
        if spec.saves_output and n.output is None:
            n.output = self.value(n)  # recomputed from the inputs as held
            self._release(n)
        if spec.saves_inputs:
            vals = []
            for i, p in enumerate(n.parents):
                v = held[i] if held is not None else None
                if v is None and p is not None:
                    v = self.value(p)
                    self._release(p)
                vals.append(v)
            n.inputs = tuple(vals)
        result = spec.backward(n, g)
        n.inputs = held
        self._settle_recompute(n)
        self.cache.pop(n, None)
        return result

    def skip(self, n: Node) -> None:
        """``n``'s step runs without a gradient: settle every claim it holds, drop its value."""
        spec = n.spec
        if spec.saves_inputs:
            for p in _fetched(n):
                self._release(p)
        if spec.saves_output and n.recipe:
            self._release(n)
        self._settle_recompute(n)
        self.cache.pop(n, None)

    def _settle_recompute(self, n: Node) -> None:
        # a needed recipe node that was never recomputed will not be now: its claims lapse
        if n.recipe and n.id not in self.counts and n in self.needed:
            for p in _fetched(n):
                self._release(p)


def _fetched(n: Node) -> list[Node]:
    """The parents whose values a ``Balanced`` node reads from them rather than holding."""
    held = n.inputs
    return [
        p for i, p in enumerate(n.parents) if p is not None and (held is None or held[i] is None)
    ]
