"""The backward side of checkpointing: values of recipe-strategy nodes during one backward pass.

``autodiff.engine`` builds one ``Recompute`` per pass that runs through a node recorded with
``fetches`` set (``ember.checkpoint.record``), and hands it those nodes' steps: it fetches the
values a step reads that its node does not hold (a kept output, a leaf, or a value recomputed
from the nearest kept ancestors) and passes them to the rule explicitly, through a ``View``;
the node itself is never written to.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from ..autodiff.node import Node
from ..ops.registry import run_forward
from .budget import ledger_of
from .report import _buffer

_id = attrgetter("id")


class Recompute:
    """Values of fetching nodes during one backward: held inputs, leaves or recomputed ones.

    A node recorded under a recipe strategy (``Balanced``) holds the raw inputs it reads that
    come from kept (non-recipe) nodes; an input from a recipe node (or a leaf) is ``None`` in
    ``node.inputs`` and fetched here. Built once per pass from the nodes the pass will run. A
    planning walk (children before parents) finds which recipe nodes' values will actually be
    asked for (``needed``) and counts, per node, the claims on its value: each fetch by a child's
    step, each recompute of a needed recipe child, and a recipe node's own step when its rule
    reads its output. A recomputed value is cached and dropped when its last claim is settled,
    so it is computed once per pass and released right after its last use. Recomputation walks
    the graph with an explicit stack, so deep chains hit no recursion limit.
    """

    __slots__ = ("_bufs", "cache", "cached", "counts", "ledger", "needed", "uses")

    def __init__(self, children: dict[Node, int], root: Node) -> None:
        ledger = ledger_of(root)
        if ledger is not None:  # a budget: learn the graph's peak, or raise if it is too small
            ledger.finish()
            if ledger.limit is None:
                ledger = None  # a fraction budget's measuring step: nothing to bound
        self.ledger = ledger
        if ledger is not None:
            ledger.step_peak = max(ledger.step_peak, ledger.peak)
        self.cache: dict[Node, Any] = {}
        self.cached = 0  # bytes of the cache's buffers (each once)
        self._bufs: dict[tuple[str, int], list[int]] = {}  # buffer key -> [bytes, entries]
        self.counts: dict[int, int] = {}  # node id -> times recomputed in this pass
        self.needed, self.uses = plan(children, root)

    def _put(self, n: Node, v: Any, stack: list[Node]) -> None:
        """Cache ``n``'s recomputed value; under a budget, evict cached values that are needed
        latest (lowest ids: backward runs from the newest node down) while held + cached bytes
        pass the limit. An evicted value is recomputed again when a step asks for it."""
        self.cache[n] = v
        led = getattr(self, "ledger", None)  # higher.py builds providers without __init__
        if led is None:
            return
        key, nbytes = _buffer(v)
        e = self._bufs.get(key)
        if e is None:
            self._bufs[key] = [nbytes, 1]
            self.cached += nbytes
        else:
            e[1] += 1
        limit: int = led.limit
        if led.total + self.cached > limit:
            keep = set(stack)
            keep.add(n)
            for m in stack:
                keep.update(m.parents)  # type: ignore[arg-type]  # None is never cached
            for m in sorted(self.cache, key=_id):
                if led.total + self.cached <= limit:
                    break
                if m not in keep:
                    self._pop(m)
                    led.evicted += 1
        led.step_peak = max(led.step_peak, led.peak, led.total + self.cached)

    def _pop(self, n: Node) -> None:
        v = self.cache.pop(n, None)
        if v is None or getattr(self, "ledger", None) is None:
            return
        key, _ = _buffer(v)
        e = self._bufs[key]
        e[1] -= 1
        if not e[1]:
            del self._bufs[key]
            self.cached -= e[0]

    def _release(self, n: Node) -> None:
        u = self.uses.get(n, 0) - 1
        self.uses[n] = u
        if u <= 0:
            self._pop(n)

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
            times = counts.get(m.id, 0) + 1
            counts[m.id] = times
            self._put(m, out, stack)
            if times == 1 and m in self.needed:  # settle the claims it held on its parents, once
                for p in _fetched(m):
                    self._release(p)
        return out

    def step(self, n: Node, g: Any) -> Any:
        """Run ``n``'s backward rule on fetched values, then settle its claims."""
        spec = n.spec
        held = n.inputs
        inputs = held
        output = n.output
        if spec.saves_output and output is None:
            output = self.value(n)  # recomputed from the inputs as held
            self._release(n)
        if spec.saves_inputs:
            vals = []
            for i, p in enumerate(n.parents):
                v = held[i] if held is not None else None
                if v is None and p is not None:
                    v = self.value(p)
                    self._release(p)
                vals.append(v)
            inputs = tuple(vals)
        result = spec.backward(View(n, inputs, output), g)
        self._settle_recompute(n)
        self._pop(n)
        led = getattr(self, "ledger", None)
        if led is not None:
            led.forget(n)
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
        self._pop(n)
        led = getattr(self, "ledger", None)
        if led is not None:
            led.forget(n)

    def _settle_recompute(self, n: Node) -> None:
        # a needed recipe node that was never recomputed will not be now: its claims lapse
        if n.recipe and n.id not in self.counts and n in self.needed:
            for p in _fetched(n):
                self._release(p)


def plan(children: dict[Node, int], root: Node) -> tuple[set[Node], dict[Node, int]]:
    """(needed, uses): the nodes whose values a backward from ``root`` will fetch, and the
    claims on each (``children``: child counts of the nodes reachable from ``root``)."""
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
        if spec is None or not c.fetches:
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
    return needed, uses


class View:
    """The ``ctx`` a fetching node's rule reads: the node's fields, with the ``inputs`` and
    ``output`` the step fetched (held, read from a parent or recomputed) given explicitly."""

    __slots__ = ("attrs", "b", "inputs", "output", "parents", "saved", "shapes")

    def __init__(self, n: Node, inputs: tuple[Any, ...] | None, output: Any) -> None:
        self.inputs = inputs
        self.output = output
        self.saved = n.saved
        self.attrs = n.attrs
        self.shapes = n.shapes
        self.parents = n.parents
        self.b = n.b


def _fetched(n: Node) -> list[Node]:
    """The parents whose values a fetching node reads from them rather than holding."""
    held = n.inputs
    return [
        p for i, p in enumerate(n.parents) if p is not None and (held is None or held[i] is None)
    ]
