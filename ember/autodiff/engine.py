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

Nodes recorded under a strategy that makes recipes (``Balanced``; ``node.fetches``) keep no
copies of the tracked inputs that recipes and leaves hold; their steps go to the checkpoint
package's value provider (``ember.checkpoint.recompute.Recompute``), which fetches those values
from the parents: a kept output, or a value recomputed from the nearest kept ancestors, once,
dropped after its last use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..checkpoint import recompute
from ..errors import AutodiffError
from ..ops.slicegrad import SliceGrad
from . import hooks
from .gradients import Gradients
from .node import Node
from .options import reaching
from .requirement import Requirement

_GRAD = Requirement.GRAD
_NONE: frozenset[Node] = frozenset()


def _consumed_error(node: Node) -> AutodiffError:
    name = node.spec.name if node.spec is not None else "leaf"
    return AutodiffError(
        f"backward: the graph was already consumed (op {name!r} ran its backward step in an "
        "earlier pass). Expected a graph built by a fresh forward; got one that backward already "
        "went through. Recompute the forward pass before calling backward() again, or pass "
        "retain_graph=True to the earlier backward to keep the graph. A state "
        "carried from one step into the next (an RNN hidden state in truncated BPTT, a running "
        "sum) still links to the previous step's graph: carry state.detach() instead."
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
    root: Node,
    seed: Any,
    on_leaf: Callable[[int, Any], None] | None = None,
    *,
    retain: bool = False,
    wanted: set[Node] | None = None,
) -> Gradients:
    """Backpropagate ``seed`` (the root's gradient) and return the kept leaf gradients.

    ``on_leaf(node_id, grad)``, when given, is called as soon as a require-grad leaf's gradient
    is complete (every child has contributed), before the rest of the pass runs; distributed
    data parallel starts that parameter's all-reduce there. ``retain``: leave the graph
    unconsumed (``retain_graph=True``). ``wanted``: keep the gradients of these nodes only
    (leaves or intermediates, ``backward(inputs=...)``), running only the steps that reach them.
    Gradient hooks (``Node.hooks``) run on each node's complete gradient before it is used.
    """
    # 1. discover the subgraph and count children; claim each op node, then reject a consumed one
    # (a pass marks its nodes consumed before it releases them), all before changing anything
    children: dict[Node, int] = {}
    stack = [root]
    fetches = False
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
        if n.fetches:
            fetches = True
        for p in n.parents:
            if p is not None:
                c = children.get(p)
                if c is None:
                    children[p] = 1
                    stack.append(p)
                else:
                    children[p] = c + 1
    try:
        return _run(root, seed, on_leaf, children, fetches, retain, wanted)
    finally:
        _release(claimed)


def _run(
    root: Node,
    seed: Any,
    on_leaf: Callable[[int, Any], None] | None,
    children: dict[Node, int],
    fetches: bool,
    retain: bool = False,
    wanted: set[Node] | None = None,
) -> Gradients:
    """Step 2 of ``run_backward``: the claimed pass itself."""
    rec = recompute.Recompute(children, root) if fetches else None
    out = Gradients()
    store = out._store
    keep = None if wanted is None else reaching(root, wanted)
    chosen = wanted if wanted is not None else _NONE

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
        if keep is not None and g is not None and n not in keep:
            g = None  # backward(inputs=...): no chosen node is upstream of this one
        if g is not None and n.hooks is not None:
            g = hooks.fire(n, g, False)
        if keep is not None and spec is not None and g is not None and n in chosen:
            store[n.id] = g  # a chosen intermediate
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
            if rec is not None and n.fetches:
                in_grads = rec.step(n, g)
            else:
                in_grads = spec.backward(n, g)
        elif rec is not None:
            rec.skip(n)
        if not retain:
            n.consumed = True
            n.inputs = None
            n.output = None
            n.saved = None
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
