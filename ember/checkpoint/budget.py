"""The record side of a memory budget (``GradientCheckpointingStrategy.budget``, SEMANTICS §7).

Under a budget every tracked value is held at most once, in its producer's ``output`` slot, and
only while some backward rule reads it (its own rule, or a child's that reads its inputs);
children fetch it from there (``node.fetches``), so dropping a value is one write. Each graph has
a ``Ledger`` (shared by its nodes) that counts the bytes held: values, residuals and the
untracked inputs that rules read, each buffer once. When recording a value would pass the
budget, the ledger drops held values that can be recomputed, cheapest first by estimated
recompute cost (``cost.py``, the value's own and that of the dropped values its recompute needs)
per byte freed; a dropped value becomes a recipe, recomputed during backward from what is held,
once (``recompute.py``). Values that share one buffer (a product and the views its children read,
attention's q, k and v of one qkv product) free it only together: they are dropped as one, their
costs summed, the bytes counted once. A value can be recomputed when each input is held, a leaf,
or itself recomputable; a node with an untracked input its rule does not read cannot be.

``fraction`` budgets are relative to the ``Disabled`` peak of the same graph: what the ledger
would hold if it dropped nothing, which it counts on every step. A graph is known by the op
names and input shapes of its first ``SIGNATURE_NODES`` nodes (all of them in a smaller graph);
the first step of an unknown one drops nothing (it measures), later steps of the same signature
use the peak measured last. Each prefix of the signature is remembered, so a later step knows its
limit from its first node on (a longer prefix that matches refines it), and its forward is
bounded from the start, not only once ``SIGNATURE_NODES`` nodes are recorded.

A budget below what the graph needs (residuals, constants, values with no recipe, once
everything recomputable is dropped) raises ``AutodiffError`` naming that minimum when backward
starts, before any step runs.
"""

from __future__ import annotations

import heapq
import weakref
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..autodiff.node import Node
from ..errors import AutodiffError
from .cost import recompute_cost
from .record import ChainNode
from .report import _buffer, _fmt

if TYPE_CHECKING:
    from ..ops.registry import OpSpec
    from .strategy import GradientCheckpointingStrategy

SIGNATURE_NODES = 16  # nodes whose (op, input shapes) identify a graph for fraction budgets
_PEAKS: dict[int, int] = {}  # graph signature -> Disabled peak of saved bytes (last measured)
_MAX_PEAKS = 1024 * SIGNATURE_NODES
_CHAIN_LOOKUP = 8  # levels of dropped ancestors a drop's cost counts
_shape_of = attrgetter("shape")
Buffer = tuple[tuple[str, int], int]  # (identity, bytes) of a memory block, as report._buffer


class BudgetNode(ChainNode):
    """A node recorded under a budget.

    Attributes (beyond ``Node``'s): ``ledger`` (its graph's ``Ledger``), ``cost`` (estimated
    cost of recomputing its output), ``rebuildable`` (its output can be recomputed from its
    inputs: every untracked input is held, every tracked one obtainable), ``dropped`` (the budget
    dropped its held output), ``buf`` (buffer key and bytes of its held output, looked up once).
    """

    __slots__ = ("buf", "cost", "dropped", "ledger", "rebuildable")
    buf: Buffer | None
    cost: float
    dropped: bool
    ledger: Ledger
    rebuildable: bool


def _obtainable(p: Node) -> bool:
    """Whether backward can get ``p``'s value: a leaf, held, or recomputable."""
    return p.spec is None or p.output is not None or bool(getattr(p, "rebuildable", False))


class Ledger:
    """Saved bytes of one graph under a budget, and the values it may drop.

    ``total`` counts held buffers (each once); ``disabled`` what would be held had nothing been
    dropped (the ``Disabled`` peak of saved values, which only grows during a forward);
    ``peak`` the largest ``total`` after each record; ``needed`` the largest ``total`` left
    when nothing more could be dropped (the graph's minimum). ``limit`` is the budget in bytes
    (``None`` while a fraction budget measures its first step). During backward
    (``recompute.Recompute``) each step's holdings are released (``forget``) and recomputed
    values count too: ``step_peak`` is the largest held + recomputed total of the whole step,
    ``evicted`` how many recomputed values were evicted to stay within ``limit`` (each is
    recomputed again when a step asks for it, so a value is recomputed once per backward
    unless the budget does not allow it).
    """

    __slots__ = (
        "_bufs",
        "_heap",
        "_nodes",
        "_seq",
        "count",
        "disabled",
        "evicted",
        "limit",
        "merged",
        "needed",
        "peak",
        "prefixes",
        "signature",
        "step_peak",
        "strategy",
        "total",
    )

    def __init__(self, strategy: GradientCheckpointingStrategy) -> None:
        self.strategy = strategy
        self.limit: int | None = strategy.bytes  # type: ignore[attr-defined]
        self.total = 0
        self.disabled = 0
        self.peak = 0
        self.needed = 0
        self.count = 0
        self.evicted = 0  # recomputed values backward evicted to stay under the limit
        self.step_peak = 0  # largest held + recomputed bytes over forward and backward
        self.signature = 0
        self.prefixes: list[int] = []  # the signature after each of the first nodes
        self.merged: Ledger | None = None
        # buffer key -> [bytes, holder ids]; holder -id: the constants and residuals of node id
        self._bufs: dict[tuple[str, int], list[Any]] = {}
        # node id -> weak reference (a plain dict of weakrefs: a WeakValueDictionary's writes
        # cost a few microseconds each, on every recorded node)
        self._nodes: dict[int, weakref.ref[BudgetNode]] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._seq = 0

    # ---------------------------------------------------------------- holding
    def hold(self, holder: int, value: Any, again: bool = False) -> Buffer:
        """Count ``value`` as held by ``holder`` (``again``: a value the budget dropped before,
        already in ``disabled``); returns its buffer."""
        buf = _buffer(value)
        key, nbytes = buf
        e = self._bufs.get(key)
        if e is None:
            self._bufs[key] = [nbytes, {holder}]
            self.total += nbytes
            if not again:
                self.disabled += nbytes
        else:
            e[1].add(holder)
        return buf

    def holds(self, value: Any) -> bool:
        """Whether ``value``'s buffer is held already."""
        return _buffer(value)[0] in self._bufs

    def release(self, holder: int, value: Any) -> None:
        self._release(holder, _buffer(value)[0])

    def _release(self, holder: int, key: tuple[str, int]) -> None:
        e = self._bufs.get(key)
        if e is None:
            return
        e[1].discard(holder)
        if not e[1]:
            del self._bufs[key]
            self.total -= e[0]
        elif len(e[1]) == 1:  # a last holder may now free the buffer by dropping it
            (other,) = e[1]
            n = self._node(other)
            if n is not None:
                self.offer(n)

    def forget(self, n: Node) -> None:
        """``n``'s backward step ran: release what it held (its output, constants, residuals)."""
        if n.output is not None:
            buf: Buffer | None = getattr(n, "buf", None)
            self._release(n.id, buf[0] if buf is not None else _buffer(n.output)[0])
        if n.inputs is not None:
            for v in n.inputs:
                if v is not None:
                    self.release(-n.id, v)
        saved = n.saved
        if saved is not None:
            for v in saved if type(saved) is tuple else (saved,):
                self.release(-n.id, v)

    def _node(self, nid: int) -> BudgetNode | None:
        ref = self._nodes.get(nid)
        return None if ref is None else ref()

    def _group(self, n: BudgetNode) -> list[BudgetNode] | None:
        """The nodes whose outputs share ``n``'s held buffer (``n`` and its views), when every
        one of them can be dropped; ``None`` while a residual or a value that cannot be
        recomputed shares it (dropping would then free nothing)."""
        e = self._bufs.get(n.buf[0])  # type: ignore[index]  # set wherever output is
        if e is None:
            return None
        holders: set[int] = e[1]
        if len(holders) == 1 and n.id in holders:
            return [n]
        group = []
        for h in holders:
            m = self._node(h) if h > 0 else None
            if m is None or m.output is None or m.consumed or not m.rebuildable:
                return None
            group.append(m)
        return group

    # ---------------------------------------------------------------- dropping
    def offer(self, n: BudgetNode) -> None:
        """Make ``n``'s held output a candidate to drop (with the views sharing its buffer)."""
        if n.output is None or not n.rebuildable:
            return
        if n.id not in self._nodes:
            self._nodes[n.id] = weakref.ref(n)
        group = self._group(n)
        if group is not None:
            self._seq += 1
            # ranked by its own cost, a lower bound: the dropped ancestors its recompute needs
            # can change before it is popped (a later reader holds one again), so ``enforce``
            # adds them when it pops it, and ranks it again if they make it dearer
            heapq.heappush(self._heap, (_group_cost(group, n, False), self._seq, n.id))

    def enforce(self) -> None:
        """Drop candidates, cheapest per byte first, until ``total`` is within the limit."""
        limit = self.limit
        if limit is None:
            self.peak = max(self.peak, self.total)
            return
        heap = self._heap
        while self.total > limit and heap:
            prio, seq, nid = heapq.heappop(heap)
            n = self._node(nid)
            if n is None or n.output is None or n.consumed:
                continue
            group = self._group(n)
            if group is None or not all(
                _obtainable(p) for m in group for p in m.parents if p is not None
            ):
                continue
            now = _group_cost(group, n)
            if now > prio * (1.0 + 1e-9) and heap and now > heap[0][0]:
                heapq.heappush(heap, (now, seq, nid))  # its cost grew since: rank it again
                continue
            for m in group:
                self._release(m.id, m.buf[0])  # type: ignore[index]
                m.output = None
                m.buf = None
                m.recipe = True
                m.dropped = True
        if self.total > limit:
            self.needed = max(self.needed, self.total)
        self.peak = max(self.peak, self.total)

    # ---------------------------------------------------------------- graph identity
    def note(self, spec: OpSpec, shapes: tuple[tuple[int, ...], ...]) -> None:
        """Count a recorded node; a fraction budget learns its limit once the graph is known."""
        self.count += 1
        if self.count <= SIGNATURE_NODES:
            self.signature = hash((self.signature, spec.name, shapes))
            self.prefixes.append(self.signature)
            self._learn()  # a smaller graph's key may match early; the full prefix decides

    def _learn(self) -> None:
        fraction = self.strategy.fraction  # type: ignore[attr-defined]
        if fraction is not None:
            peak = _PEAKS.get(self.signature)
            if peak is not None:
                self.limit = max(1, int(fraction * peak))

    def finish(self) -> None:
        """At backward start: remember the graph's Disabled peak; raise when the budget is too
        small (nothing has changed yet)."""
        if len(_PEAKS) >= _MAX_PEAKS:
            _PEAKS.clear()
        for sig in self.prefixes:  # a later step learns its limit from its first node on
            _PEAKS[sig] = self.disabled
        limit = self.limit
        if limit is not None and self.needed > limit:
            need = self.needed
            frac = ""
            if self.disabled:
                frac = f" (fraction >= {need / self.disabled:.3f} of the Disabled peak " + (
                    f"{_fmt(self.disabled)})"
                )
            raise AutodiffError(
                f"backward: the memory budget of {_fmt(limit)} ({self.strategy!r}) is below what "
                f"this graph needs to run: at least {need} bytes ({_fmt(need)}){frac}: residuals, "
                "constants and values no op can recompute stay held. Nothing was changed. Hint: "
                "raise the budget to at least that, or use GradientCheckpointingStrategy.Balanced."
            )

    def absorb(self, other: Ledger) -> None:
        """Take over ``other``'s holdings (two graphs recorded apart meet in one op)."""
        for key, (nbytes, holders) in other._bufs.items():
            e = self._bufs.get(key)
            if e is None:
                self._bufs[key] = [nbytes, set(holders)]
                self.total += nbytes
            else:
                e[1].update(holders)
        self.disabled += other.disabled
        self.needed = max(self.needed, other.needed)
        for ref in list(other._nodes.values()):
            n = ref()
            if n is not None:
                self.offer(n)
        self.count += other.count
        other.merged = self


def _budget_node(p: Node) -> bool:
    return type(p) is BudgetNode


def ledger_of(n: Node) -> Ledger | None:
    """The ledger of a budget node's graph (following merges), or ``None``."""
    led: Ledger | None = getattr(n, "ledger", None)
    while led is not None and led.merged is not None:
        led = led.merged
    return led


def _group_cost(group: list[BudgetNode], n: BudgetNode, ancestors_too: bool = True) -> float:
    """Recompute cost per byte freed of dropping ``group`` (``n`` and the views of its buffer):
    each member's own cost, plus (``ancestors_too``) the dropped ancestors' that its recompute
    needs, once (views of one buffer share them: the most any member needs)."""
    own = ancestors = 0.0
    for m in group:
        own += m.cost
        a = _ancestors_cost(m, _CHAIN_LOOKUP) if ancestors_too else 0.0
        if a > ancestors:
            ancestors = a
    return (own + ancestors) / max(n.buf[1], 1)  # type: ignore[index]


def _ancestors_cost(n: Node, depth: int) -> float:
    if depth == 0:
        return 0.0
    worst = 0.0
    for p in n.parents:
        if p is not None and p.spec is not None and p.output is None:
            c: float = getattr(p, "cost", 0.0) + _ancestors_cost(p, depth - 1)
            if c > worst:
                worst = c
    return worst


def record(
    strategy: GradientCheckpointingStrategy,
    spec: OpSpec,
    parents: tuple[Node | None, ...],
    raws: tuple[Any, ...],
    out: Any,
    attrs: dict[str, Any],
    b: Any,
    saved: Any = None,
) -> Node:
    """The node of ``spec``'s result ``out`` under a budget (``record.node`` calls this)."""
    ledger: Ledger | None = None
    for p in parents:
        if p is not None:
            led = ledger_of(p)
            if led is not None:
                if ledger is None:
                    ledger = led
                elif led is not ledger:
                    ledger.absorb(led)
    if ledger is None:
        ledger = Ledger(strategy)
    shapes = tuple(map(_shape_of, raws))
    reads_inputs = spec.saves_inputs
    # untracked inputs its rule reads are held here (and those the graph holds already: free);
    # tracked ones are fetched from their nodes (a node recorded under another strategy is read
    # as record.node would: its raw, if kept)
    inputs = tuple(
        [
            (r if reads_inputs or ledger.holds(r) else None)
            if p is None
            else (r if reads_inputs and not _budget_node(p) and not p.recipe and p.spec else None)
            for p, r in zip(parents, raws)
        ]
    )
    held_output = spec.saves_output
    n = BudgetNode(
        spec,
        parents,
        inputs,
        out if held_output else None,
        attrs,
        shapes,
        b,
        recipe=not held_output,
        fetches=True,
    )
    n.depth = 0
    n.saved = saved
    n.ledger = ledger
    n.dropped = False
    n.buf = None
    n.cost = recompute_cost(spec, shapes, tuple(out.shape), attrs, b)
    ledger.note(spec, shapes)
    if reads_inputs:
        for p, r in zip(parents, raws):
            if p is None:
                ledger.hold(-n.id, r)
            elif type(p) is BudgetNode and p.output is None:
                # a child's rule reads it: hold the value (again, if the budget had dropped it)
                again = p.dropped
                p.output = r
                p.recipe = False
                p.dropped = False
                p.buf = ledger.hold(p.id, r, again)
                ledger.offer(p)
    n.rebuildable = not spec.random and all(
        _obtainable(p) if p is not None else v is not None for p, v in zip(parents, inputs)
    )
    if saved is not None:
        for v in saved if type(saved) is tuple else (saved,):
            ledger.hold(-n.id, v)
    if held_output:
        n.buf = ledger.hold(n.id, out)
        ledger.offer(n)
    ledger.enforce()
    return n
