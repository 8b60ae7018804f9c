"""The recorded backward pass behind ``backward(create_graph=True)`` and ``ember.autodiff.grad``.

It walks the graph as ``engine.run_backward`` does (claims, consumed check, reverse topological
order, fan-in sums, broadcast gradients summed back), but runs each row's own rule on tensors:
``ctx.b`` is a ``RuleBackend`` and ``ctx.inputs`` / ``ctx.output`` are the node's saved values
wrapped as tensors that carry the node's parents (the output carries the node itself). Every op a
rule performs is then a registry row recorded into a new graph that reaches back into the first
one, so the gradients it returns are tracked tensors with their own ``backward()`` (SEMANTICS.md
§13). The first graph is left unconsumed, unless the caller asks for a plain pass that consumes
it (``grad(..., create_graph=False)``). Nodes recorded under a recipe strategy (``Balanced``) get
their missing values from ``ember.checkpoint.recompute``, so checkpointing keeps working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._core import device as _device
from .._core.dispatch import wrap
from .._core.tensor import Tensor
from ..checkpoint import recompute
from ..checkpoint.budget import ledger_of
from ..errors import AutodiffError
from ..ops.slicegrad import SliceGrad
from . import engine, hooks, options
from .gradients import Gradients
from .node import Node
from .requirement import Requirement
from .rule_backend import NotRecordable, RuleBackend, RuleTensor

_GRAD = Requirement.GRAD


def _lse_of_linear(rb: RuleBackend, inputs: tuple[Tensor, ...], attrs: dict[str, Any]) -> Tensor:
    """linear_cross_entropy's residual, each row's logsumexp of ``x W^T + b``, rebuilt from the
    inputs as rows (the full (N, V) logits are held for this pass: the chunked forward's saving
    does not carry over to a recorded backward)."""
    x, w, bias, _ = inputs
    z = rb.row("linear", (x, w, bias))
    m = rb.const(rb.raw.max_dim(z._data, 1))  # the shift: its gradient cancels, a constant
    lse = rb.log(rb.sum_dim(rb.exp(z - m), 1)) + m
    return rb.reshape(lse, (x.shape[0],))


def _lstm_sequence(rb: RuleBackend, inputs: tuple[Tensor, ...], attrs: dict[str, Any]) -> Tensor:
    """lstm_layer's generic residual, the ``[h | c]`` sequence, as the input GEMM and one
    ``lstm_seq`` row (a cuDNN layer's reserve space has no recorded form; this replaces it)."""
    from ..ops.lstm_layer import _projection

    x, w_ih, w_hh, b_ih, b_hh, h0, c0 = inputs
    xw = _projection(rb, x, w_ih, b_ih, b_hh)
    return rb.row("lstm_seq", (xw, w_hh, h0, c0), reverse=attrs["reverse"])


def _recurrent_sequence(
    rb: RuleBackend, inputs: tuple[Tensor, ...], attrs: dict[str, Any]
) -> Tensor:
    """recurrent_layer's generic residual, the ``h`` sequence, as the input GEMM and one
    ``gru_seq`` / ``rnn_seq`` row (a cuDNN layer's reserve space has no recorded form)."""
    from ..ops.recurrent_layer import projection

    x, w_ih, w_hh, b_ih, b_hh, h0 = inputs
    mode, reverse = attrs["mode"], attrs["reverse"]
    xw = projection(rb, x, w_ih, b_ih, b_hh, mode)
    if mode == "gru":
        return rb.row("gru_seq", (xw, w_hh, b_hh, h0), reverse=reverse)
    return rb.row("rnn_seq", (xw, w_hh, h0), reverse=reverse, nonlinearity=mode[4:])


# residual rows with a recorded form: the residual (a function of the inputs and attributes)
# rebuilt as rows, or None where the RuleBackend kernel recomputes it itself (cross_entropy's
# logsumexp); any other residual row has no recorded form
_RESIDUALS: dict[str, Any] = {
    "cross_entropy": None,
    "linear_cross_entropy": _lse_of_linear,
    "lstm_layer": _lstm_sequence,
    "recurrent_layer": _recurrent_sequence,
}


class _Ctx:
    """What a rule reads, as tensors (the recorded counterpart of ``Node`` / ``View``)."""

    __slots__ = ("attrs", "b", "inputs", "output", "parents", "saved", "shapes")

    def __init__(
        self,
        n: Node,
        b: RuleBackend,
        inputs: tuple[Any, ...] | None,
        output: Any,
        parents: tuple[Node | None, ...],
    ) -> None:
        self.b = b
        self.inputs = inputs
        self.output = output
        self.saved = n.saved
        self.attrs = n.attrs
        self.shapes = n.shapes
        self.parents = parents


def _device_of(b: Any) -> Any:
    """The plain ``Device`` whose backend instance is ``b``."""
    for dev in list(_device._PLAIN.values()):
        if dev.b is b:
            return dev
    raise AutodiffError(  # every backend instance comes from a Device
        f"backward(create_graph=True): no device owns the backend {b!r}. Expected tensors "
        "created through em.Device; got a graph built on a bare backend."
    )


def _no_form(name: str, why: str) -> AutodiffError:
    return AutodiffError(
        f"backward(create_graph=True): op {name!r} has no differentiable backward: {why}. "
        f"Expected every row on the path to have one; got {name!r}. Use backward() (first "
        f"order) for this graph, or .detach() the input of {name!r} so no higher-order "
        "gradient flows through it."
    )


def _fresh_values() -> recompute.Recompute:
    """A value provider for recipe nodes that keeps every value it recomputes for the pass
    (the recorded graph references them anyway); no planning, no early release."""
    rec = object.__new__(recompute.Recompute)
    rec.cache = {}
    rec.counts = {}
    rec.uses = {}
    rec.needed = set()
    return rec


def _readers(order: list[Node]) -> dict[Node, int]:
    """How many steps of the pass read each fetched value (a recipe's, a dropped one's, a leaf's):
    what ``_settle`` counts down, so a recomputed value is dropped after its last read."""
    reads: dict[Node, int] = {}
    for n in order:
        spec = n.spec
        if spec is None or not n.fetches:
            continue
        if spec.saves_inputs:
            for p in recompute._fetched(n):
                reads[p] = reads.get(p, 0) + 1
        if spec.saves_output and n.output is None:
            reads[n] = reads.get(n, 0) + 1
    return reads


def _settle(n: Node, rec: recompute.Recompute, reads: dict[Node, int]) -> None:
    """After ``n``'s step (run or skipped): count its reads off and drop every cached value no
    later step reads (a value asked for again is recomputed; the recorded graph keeps its own
    references to what it uses)."""
    spec = n.spec
    if spec.saves_inputs:
        for p in recompute._fetched(n):
            reads[p] = reads.get(p, 0) - 1
    if spec.saves_output and n in reads:
        reads[n] -= 1
    cache = rec.cache
    for m in [m for m in cache if reads.get(m, 0) <= 0]:
        del cache[m]


def _discover(roots: Sequence[Node]) -> tuple[list[Node], list[Node]]:
    """(topological order from the roots, claimed op nodes); raises before changing anything
    when a node is consumed or claimed by another pass."""
    children: dict[Node, int] = {}
    stack = list(dict.fromkeys(roots))
    seen = set(stack)
    token = object()
    claim = engine._claims.setdefault
    claimed: list[Node] = []
    while stack:
        n = stack.pop()
        if n.spec is not None:
            if claim(n, token) is not token:
                engine._release(claimed)
                raise engine._busy_error(n)
            claimed.append(n)
            if n.consumed:
                engine._release(claimed)
                raise engine._consumed_error(n)
        for p in n.parents:
            if p is not None:
                children[p] = children.get(p, 0) + 1
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
    order: list[Node] = []
    ready = [r for r in dict.fromkeys(roots) if r not in children]
    while ready:
        n = ready.pop()
        order.append(n)
        for p in n.parents:
            if p is not None:
                c = children[p] - 1
                children[p] = c
                if not c:
                    ready.append(p)
    return order, claimed


def _relevant(order: list[Node], wanted: set[Node]) -> set[Node]:
    """The nodes from which some wanted node is reached (their steps are the ones needed)."""
    keep: set[Node] = set()
    for n in reversed(order):  # parents before children
        if n in wanted or any(p in keep for p in n.parents if p is not None):
            keep.add(n)
    return keep


def backward_graph(loss: Tensor, gradient: Tensor | None = None, inputs: Any = None) -> Gradients:
    """``loss.backward(create_graph=True)``: the backward recorded as graph ops.

    The returned ``Gradients`` hold tracked tensors (``leaf.grad(grads)`` returns them) of a new
    graph on the same leaves, which reaches back into ``loss``'s graph; that graph is left
    unconsumed (SEMANTICS.md §13). ``gradient``: the seed (default ones; a tracked one is
    differentiated through too); ``inputs``: the tensors whose gradients it holds, and only those.
    """
    node = loss._node
    if node is None:
        raise untracked_error("backward", loss)
    dev = loss._dev
    if gradient is None:
        seed = wrap(Tensor, dev.b.ones_like(loss._data), dev, loss._strategy)
    else:
        seed = options.seed_of("backward", loss, gradient)
        if seed._strategy is None:
            seed = wrap(Tensor, seed._data, dev, loss._strategy)
    wanted = None if inputs is None else options.chosen("backward", inputs)
    out = Gradients()
    store = out._store
    for n, g in graph_pass([node], [seed], dev, loss._strategy, wanted, consume=False).items():
        store[n.id] = g
    return out


def untracked_error(op: str, t: Tensor) -> AutodiffError:
    what = "a plain tensor" if t._strategy is None else "an untracked autodiff tensor"
    return AutodiffError(
        f"{op}: expected a tracked tensor, got {what}; nothing upstream requires a gradient. "
        "Call .autodiff().require_grad() on the source leaf (or create it on an autodiff "
        "device) before the forward pass."
    )


def graph_pass(
    roots: Sequence[Node],
    seeds: Sequence[Tensor],
    dev: Any,
    strategy: Any,
    wanted: set[Node] | None,
    *,
    consume: bool,
) -> dict[Node, Tensor]:
    """Backpropagate ``seeds`` (one tensor per root) with the rules run on tensors.

    Args:
        roots: The output nodes.
        seeds: Their gradients (tensors of the roots' shapes; tracked seeds are differentiated
            through as well).
        dev: The plain device of the roots.
        strategy: The autodiff context of the recorded gradients; ``None`` records nothing (the
            gradients are plain tensors).
        wanted: The nodes whose complete gradient is returned; ``None``: every require-grad leaf.
        consume: Mark the pass's nodes consumed and drop their saved values afterwards, as
            ``backward()`` does (the recorded graph must not be kept then).

    Returns:
        Node -> gradient tensor, for the wanted nodes the pass reached.
    """
    order, claimed = _discover(roots)
    try:
        return _run(order, roots, seeds, dev, strategy, wanted, consume)
    finally:
        engine._release(claimed)


def _run(
    order: list[Node],
    roots: Sequence[Node],
    seeds: Sequence[Tensor],
    dev: Any,
    strategy: Any,
    wanted: set[Node] | None,
    consume: bool,
) -> dict[Node, Tensor]:
    record = strategy is not None
    keep = _relevant(order, wanted) if wanted is not None else None
    rec = None
    if any(n.fetches for n in order):
        for r in roots:  # a budget: learn the graph's peak, or raise if it is too small
            ledger = ledger_of(r)
            if ledger is not None:
                ledger.finish()
        rec = _fresh_values()
    backends: dict[Any, RuleBackend] = {dev.b: RuleBackend(dev, strategy)}

    def backend_of(b: Any) -> RuleBackend:
        rb = backends.get(b)
        if rb is None:
            rb = backends[b] = RuleBackend(_device_of(b), strategy)
        return rb

    def as_tensor(raw: Any, b: Any, node: Node | None) -> Tensor:
        rb = backend_of(b)
        return wrap(RuleTensor, raw, rb.dev, strategy, node if record else None)

    grads: dict[Node, Tensor] = {}
    for r, s in zip(roots, seeds):
        s = wrap(RuleTensor, s._data, s._dev, s._strategy if record else None, s._node)
        prev = grads.get(r)
        grads[r] = s if prev is None else prev + s
    reads = _readers(order) if rec is not None else None
    out: dict[Node, Tensor] = {}
    for n in order:
        g = grads.pop(n, None)
        if keep is not None and n not in keep:
            g = None  # no wanted node is upstream: its hooks and step do not run
        if g is not None and n.hooks is not None:
            g = hooks.fire(n, g, True)
        if g is not None:
            if wanted is None:
                if n.spec is None and n.requirement is _GRAD:
                    out[n] = _leaf_dtype(g, n)
            elif n in wanted:
                out[n] = g if n.spec is not None else _leaf_dtype(g, n)
        if n.spec is None:
            continue
        parents = n.parents
        if keep is not None:
            parents = tuple(p if p is not None and p in keep else None for p in parents)
        if g is not None and parents.count(None) != len(parents):
            rb = backend_of(n.b)
            in_grads = _step(n, g, parents, rb, as_tensor, rec)
            for i, p in enumerate(parents):
                if p is None:
                    continue
                gi = in_grads[i]
                if gi is None:
                    continue
                if type(gi) is SliceGrad:
                    gi = gi.dense()
                shape = n.shapes[i]
                if tuple(gi.shape) != tuple(shape):
                    gi = rb.sum_to_shape(gi, shape)
                prev = grads.get(p)
                grads[p] = gi if prev is None else prev + gi
        if reads is not None and n.fetches:
            _settle(n, rec, reads)  # type: ignore[arg-type]
    if consume:
        for n in order:
            if n.spec is not None:
                n.consumed = True
                n.inputs = None
                n.output = None
                n.saved = None
    return {n: _public(t) for n, t in out.items()}


def _step(
    n: Node,
    g: Tensor,
    parents: tuple[Node | None, ...],
    rb: RuleBackend,
    as_tensor: Any,
    rec: recompute.Recompute | None,
) -> tuple[Any, ...]:
    """Run ``n``'s rule on tensors: its saved (or fetched) values, ``g`` as the gradient."""
    spec = n.spec
    name = spec.name
    if spec.saves_residuals and name not in _RESIDUALS:
        raise _no_form(name, "its rule reads residuals that the recorded pass cannot rebuild")
    if name == "to_device":
        src = n.attrs["src"]
        return (g.to_device(_device_of(src)),)
    inputs = None
    if spec.saves_inputs:
        held = n.inputs
        vals = []
        for i, p in enumerate(n.parents):
            v = held[i] if held is not None else None
            if v is None and p is not None:
                v = rec.value(p) if rec is not None else p.output
            vals.append(as_tensor(v, n.b, p))
        inputs = tuple(vals)
    output = None
    if spec.saves_output:
        v = n.output
        if v is None and rec is not None:
            v = rec.value(n)
        output = as_tensor(v, n.b, n)
    rule = spec.rule
    assert rule is not None  # a recorded node's row is differentiable
    ctx = _Ctx(n, rb, inputs, output, parents)
    rebuild = _RESIDUALS.get(name) if spec.saves_residuals else None
    if rebuild is not None:
        ctx.saved = rebuild(rb, inputs, n.attrs)
    try:
        result = rule(ctx, g)
    except NotRecordable as e:
        raise _no_form(
            name, f"its rule calls the fused backend kernel {e.kernel!r}, which has no row"
        ) from None
    except AttributeError as e:
        if getattr(e, "obj", None) is not rb:
            raise
        raise _no_form(name, f"its rule calls backend method {e.name!r}, which has no row") from e
    if type(result) is not tuple:
        result = (result,)
    return result


def _leaf_dtype(g: Tensor, n: Node) -> Tensor:
    v = n.output  # a leaf keeps its value
    if v is not None:
        want = n.b.dtype_of(v)
        if g.dtype is not want:
            return g.cast(want)
    return g


def _public(t: Tensor) -> Tensor:
    """``t`` as a plain ``Tensor`` handle (the same data, context and node)."""
    if type(t) is Tensor:
        return t
    return wrap(Tensor, t._data, t._dev, t._strategy, t._node)
