"""``ember.autodiff.Function``: an op with a user-written forward and backward.

``MyFn.apply(*args)`` runs ``MyFn.forward(ctx, *args)`` on plain views of the tensor arguments
(nothing inside is recorded) and records one graph node whose step calls
``MyFn.backward(ctx, *grads)``. The node keeps what ``ctx.save`` named, under every strategy; a
class that declares ``memory_bound = True`` (and returns one tensor) is instead a recipe under a
strategy that makes recipes: its forward reruns during backward (SEMANTICS.md §7). Under
``backward(create_graph=True)`` the backward runs on tracked tensors (saved inputs and outputs
carry their graph; a saved intermediate of forward is a constant, as in PyTorch), so a backward
written with tensor ops is differentiable in turn. A budget strategy neither drops nor counts what
a kept Function node holds.

A forward that returns a tuple records one node for the op plus one selector node per float
output; the selectors hand their gradients to the op node as one ``_Pack``.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

from .._core import checks
from .._core.dispatch import wrap
from .._core.tensor import Tensor
from ..checkpoint import record as _checkpoint
from ..errors import AutodiffError, DeviceError, DTypeError, ShapeError
from ..ops.registry import Cost, OpSpec, Saves
from .node import Node
from .rule_backend import RuleBackend


class FunctionCtx:
    """The ``ctx`` a ``Function``'s forward and backward share.

    ``ctx.save(*tensors)`` in forward names what backward reads back as ``ctx.saved`` (a tuple
    of tensors, in order); ``ctx.needs_input_grad[i]`` tells whether argument ``i`` is a
    tracked tensor. Other attributes (numbers, flags) may be set freely in forward.
    """

    needs_input_grad: tuple[bool, ...]

    def __init__(self) -> None:
        self._saved: tuple[Any, ...] = ()
        self._now: tuple[Any, ...] | None = None  # the saved tensors during one backward call
        self.needs_input_grad = ()

    def save(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` (inputs, outputs or intermediates of forward) for backward."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise DTypeError(
                    f"ctx.save: expected em.Tensor (or None) arguments, got "
                    f"{type(t).__name__} at position {i}. Keep other values as ctx attributes "
                    "(ctx.scale = 0.5)."
                )
        self._saved = tensors

    @property
    def saved(self) -> tuple[Any, ...]:
        """What ``save`` kept: in backward, tensors on the values forward saw."""
        return self._now if self._now is not None else self._saved


class _Pack:
    """The gradients of a tuple-output op node, one slot per output (``None``: none arrived).
    ``shape`` matches the selectors' recorded input shape, so passes never reshape it."""

    __slots__ = ("grads",)
    shape: ClassVar[tuple[int, ...]] = ()

    def __init__(self, grads: list[Any]) -> None:
        self.grads = grads

    def __add__(self, other: _Pack) -> _Pack:
        return _Pack(
            [a if b is None else b if a is None else a + b for a, b in zip(self.grads, other.grads)]
        )


def _select_rule(ctx: Any, grad: Any) -> tuple[Any, ...]:
    slots: list[Any] = [None] * ctx.attrs["count"]
    slots[ctx.attrs["index"]] = grad
    return (_Pack(slots),)


_SELECT = OpSpec("autodiff.Function output", 1, _select_rule, Cost.COMPUTE_BOUND, Saves.NONE)


class _State:
    """What one ``apply`` call leaves its node (in ``attrs["ctx"]``): the user's ctx and the
    layout needed to rebuild arguments, saved values and gradients."""

    __slots__ = (
        "args",
        "cls",
        "ctx",
        "in_devs",
        "in_dtypes",
        "in_pos",
        "node",
        "outs",
        "plan",
        "selectors",
        "single",
    )

    def __init__(self, cls: type[Function], ctx: FunctionCtx, args: tuple[Any, ...]) -> None:
        self.cls = cls
        self.ctx = ctx
        self.args = tuple(None if isinstance(a, Tensor) else a for a in args)
        self.in_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.in_devs = [args[i]._dev for i in self.in_pos]
        self.in_dtypes = [args[i].dtype for i in self.in_pos]
        self.outs: list[tuple[tuple[int, ...], Any, Any]] = []  # (shape, dtype, device)
        self.plan: list[tuple[str, int, int]] = []
        self.selectors: list[Any] = []
        self.node: Any = None
        self.single = True


def _rerun(*raws: Any, ctx: _State) -> Any:
    """The forward of a recipe node, as the kernel table calls it: the raw output again."""
    args = list(ctx.args)
    for k, (i, dev) in enumerate(zip(ctx.in_pos, ctx.in_devs)):
        args[i] = wrap(Tensor, raws[k], dev)
    return ctx.cls.forward(FunctionCtx(), *args)._data


_SPECS: dict[tuple[type, bool, bool, bool], OpSpec] = {}


def _spec(cls: type[Function], inputs: bool, output: bool, recipe: bool) -> OpSpec:
    key = (cls, inputs, output, recipe)
    spec = _SPECS.get(key)
    if spec is None:
        saves = (Saves.INPUTS if inputs else Saves.NONE) | (Saves.OUTPUT if output else Saves.NONE)
        cost = Cost.MEMORY_BOUND if recipe else Cost.COMPUTE_BOUND
        # arity 0: variadic; a Function node never passes through dispatch
        spec = _SPECS.setdefault(key, OpSpec(_name(cls), 0, _rule, cost, saves))
    return spec


def _name(cls: type) -> str:
    return f"autodiff.Function:{cls.__qualname__}"


class Function:
    """Base class of user-defined differentiable ops.

    Subclasses define ``forward(ctx, *args) -> Tensor | tuple[Tensor, ...]`` and
    ``backward(ctx, *grads) -> grad | tuple`` as static (or class) methods, and call
    ``MyFn.apply(*args)``. ``backward`` gets one gradient per output (zeros for a float output
    no gradient reached) and returns one per argument of ``forward``: a tensor of that
    argument's shape, or ``None`` (non-tensor arguments, or no gradient). Works on every backend.

    Attributes:
        memory_bound: ``True``: under ``Balanced`` (and budgets) the node keeps a recipe and
            forward reruns during backward, as for elementwise rows; ``False`` (default): kept.

    Example:
        >>> class Square(em.autodiff.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved
        ...         return g * x * 2.0
        >>> x = em.tensor([3.0], device=em.Device.cpu().autodiff()).require_grad()
        >>> x.grad(Square.apply(x).sum().backward()).tolist()
        [6.0]
    """

    memory_bound: ClassVar[bool] = False

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        """The computation, on plain tensors (shapes: the subclass's)."""
        raise AutodiffError(
            "Function.forward: not defined. Subclasses of em.autodiff.Function define "
            "forward(ctx, *inputs) as a staticmethod."
        )

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        """Gradients of the arguments from gradients of the outputs."""
        raise AutodiffError(
            "Function.backward: not defined. Subclasses of em.autodiff.Function define "
            "backward(ctx, *grads) as a staticmethod, returning one gradient per input."
        )

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` on ``args`` and record one node: the output tensor(s)."""
        op = f"{cls.__name__}.apply"
        if cls is Function:
            raise AutodiffError(
                f"{op}: expected a subclass of em.autodiff.Function, got the base class. "
                "Subclass it with forward and backward."
            )
        dev = strategy = None
        parents: list[Node | None] = []
        views = list(args)
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                continue
            if dev is None:
                dev = a._dev
            elif a._dev is not dev:
                checks.same_device(op, dev, a._dev)
            s = a._strategy
            if s is not None and s is not strategy:
                if strategy is None:
                    strategy = s
                elif s != strategy:
                    raise checks.same_strategy(op, strategy, s)
            parents.append(a._node)
            views[i] = wrap(Tensor, a._data, a._dev)  # plain: nothing inside is recorded
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._node is not None for a in args)
        result = cls.forward(ctx, *views)
        single = isinstance(result, Tensor)
        outs = (result,) if single else result
        if not isinstance(outs, (tuple, list)) or not all(isinstance(o, Tensor) for o in outs):
            raise DTypeError(
                f"{cls.__name__}.forward: expected an em.Tensor or a tuple of them, got "
                f"{type(result).__name__}. Return the output tensors."
            )
        outs = tuple(outs)
        tracked = strategy is not None and parents.count(None) != len(parents)
        floats = [o.dtype.is_float for o in outs]
        if not tracked or not any(floats):
            done = tuple(wrap(Tensor, o._data, o._dev, strategy) for o in outs)
            return done[0] if single else done
        return _record(cls, ctx, args, views, outs, tuple(parents), strategy, dev, single)


def _record(
    cls: type[Function],
    ctx: FunctionCtx,
    args: tuple[Any, ...],
    views: list[Any],
    outs: tuple[Tensor, ...],
    parents: tuple[Node | None, ...],
    strategy: Any,
    dev: Any,
    single: bool,
) -> Any:
    """The node (and selectors) of one ``apply`` call; returns the output tensors."""
    st = _State(cls, ctx, args)
    st.single = single
    st.outs = [(tuple(o.shape), o.dtype, o._dev) for o in outs]
    inputs_at = {id(views[i]): k for k, i in enumerate(st.in_pos)}
    outputs_at = {id(o): k for k, o in enumerate(outs)}
    saved_raws: list[Any] = []
    uses_inputs = uses_output = False
    for t in ctx._saved:
        if t is None:
            st.plan.append(("none", 0, -1))
        elif id(t) in inputs_at:
            st.plan.append(("input", inputs_at[id(t)], -1))
            uses_inputs = True
        elif single and id(t) in outputs_at:
            st.plan.append(("output", 0, -1))
            uses_output = True
        else:
            st.plan.append(("value", len(saved_raws), outputs_at.get(id(t), -1)))
            saved_raws.append(t._data)
    ctx._saved = ()  # the node holds the raw values now
    b = dev.b
    raws = tuple(views[i]._data for i in st.in_pos)
    saved = tuple(saved_raws) if saved_raws else None
    recipe = bool(cls.memory_bound) and single and strategy.recipes
    spec = _spec(cls, uses_inputs, uses_output, recipe)
    attrs = {"ctx": st}
    if single:
        out = outs[0]._data
        if recipe:
            b.table.setdefault(spec.name, _rerun)  # what recompute runs for this row's name
            node = _checkpoint.node(strategy, spec, parents, raws, out, attrs, b, saved)
        else:
            node = _plain_node(spec, parents, raws, out, attrs, b, saved)
        st.node = weakref.ref(node)
        return wrap(Tensor, out, outs[0]._dev, strategy, node)
    node = _plain_node(spec, parents, raws, None, attrs, b, saved)
    st.node = weakref.ref(node)
    done = []
    count = len(outs)
    for k, o in enumerate(outs):
        sel = None
        if o.dtype.is_float:
            sel = Node(_SELECT, (node,), None, None, {"index": k, "count": count}, ((),), b)
        st.selectors.append(None if sel is None else weakref.ref(sel))
        done.append(wrap(Tensor, o._data, o._dev, strategy, sel))
    return tuple(done)


def _plain_node(
    spec: OpSpec,
    parents: tuple[Node | None, ...],
    raws: tuple[Any, ...],
    out: Any,
    attrs: dict[str, Any],
    b: Any,
    saved: Any,
) -> Node:
    """A node that keeps what its backward reads under every strategy (never a recipe)."""
    n = Node(
        spec,
        parents,
        raws if spec.saves_inputs else None,
        out if spec.saves_output else None,
        attrs,
        tuple(tuple(r.shape) for r in raws),
        b,
    )
    n.saved = saved
    return n


def _rule(nctx: Any, grad: Any) -> tuple[Any, ...]:
    """The engine's step of a Function node: the user's backward on tensors."""
    st: _State = nctx.attrs["ctx"]
    rb = nctx.b if isinstance(nctx.b, RuleBackend) else None
    cls = st.cls
    gs = grad.grads if type(grad) is _Pack else [grad]
    out_grads = []
    for g, (shape, dtype, odev) in zip(gs, st.outs):
        if g is None:
            g = Tensor.zeros(shape, device=odev, dtype=dtype) if dtype.is_float else None
        elif rb is None:
            g = wrap(Tensor, g, odev)
        out_grads.append(g)
    ctx = st.ctx
    ctx._now = tuple(_saved_values(st, nctx, rb))
    try:
        result = cls.backward(ctx, *out_grads)
    finally:
        ctx._now = None
    return _input_grads(st, nctx, result, rb is not None)


def _saved_values(st: _State, nctx: Any, rb: RuleBackend | None) -> list[Any]:
    """The tensors of ``ctx.saved`` for this backward call (tracked ones when recording)."""
    vals: list[Any] = []
    for kind, k, out_k in st.plan:
        if kind == "none":
            vals.append(None)
        elif kind == "input":
            v = nctx.inputs[k]
            vals.append(v if rb is not None else wrap(Tensor, v, st.in_devs[k]))
        elif kind == "output":
            v = nctx.output
            vals.append(v if rb is not None else wrap(Tensor, v, st.outs[0][2]))
        else:
            raw = nctx.saved[k]
            odev = st.outs[out_k][2] if out_k >= 0 else _device_of_raw(st, raw)
            if rb is None:
                vals.append(wrap(Tensor, raw, odev))
            else:  # an output of a tuple op carries its selector; other values are constants
                vals.append(wrap(Tensor, raw, odev, rb.strategy, _selector(st, out_k)))
    return vals


def _device_of_raw(st: _State, raw: Any) -> Any:
    """The device an intermediate value saved in forward lives on (the node's, as a rule)."""
    for dev in (*st.in_devs, *(o[2] for o in st.outs)):
        if type(raw) is dev.b.array_type:
            return dev
    return st.in_devs[0]


def _selector(st: _State, k: int) -> Node | None:
    """Output ``k``'s selector node (rebuilt on the op node if every handle of it is gone)."""
    if k < 0:
        return None
    ref = st.selectors[k]
    sel = ref() if ref is not None else None
    if sel is None and ref is not None:
        node = st.node()
        sel = Node(_SELECT, (node,), None, None, {"index": k, "count": len(st.outs)}, ((),), node.b)
        st.selectors[k] = weakref.ref(sel)
    return sel


def _input_grads(st: _State, nctx: Any, result: Any, recorded: bool) -> tuple[Any, ...]:
    """``result`` checked (count, types, shapes) and turned into one gradient per node input."""
    name = st.cls.__name__
    n_args = len(st.args)
    if type(result) is not tuple:
        result = tuple(result) if isinstance(result, list) else (result,)
    if len(result) != n_args:
        raise AutodiffError(
            f"{name}.backward: expected {n_args} gradient(s), one per argument of forward, got "
            f"{len(result)}. Return a tuple with None for arguments that get no gradient."
        )
    pos = {i: k for k, i in enumerate(st.in_pos)}
    grads: list[Any] = [None] * len(st.in_pos)
    for i, g in enumerate(result):
        if g is None:
            continue
        k = pos.get(i)
        if k is None:
            raise AutodiffError(
                f"{name}.backward: expected None for argument {i} of forward (a "
                f"{type(st.args[i]).__name__}, not a tensor), got a {type(g).__name__}."
            )
        if not isinstance(g, Tensor):
            raise DTypeError(
                f"{name}.backward: expected an em.Tensor (or None) as gradient {i}, got "
                f"{type(g).__name__}."
            )
        shape = tuple(nctx.shapes[k])
        if tuple(g.shape) != shape:
            raise ShapeError(
                f"{name}.backward: expected gradient {i} of the input's shape {shape}, got "
                f"{tuple(g.shape)}. Sum a broadcast gradient back to the input's shape."
            )
        dev = st.in_devs[k]
        if g._dev is not dev:
            raise DeviceError(
                f"{name}.backward: expected gradient {i} on the input's device {dev!r}, got "
                f"one on {g._dev!r}. Move it with .to_device(...)."
            )
        want = st.in_dtypes[k]
        if g.dtype is not want and want.is_float:
            g = g.cast(want)
        grads[k] = g if recorded else g._data
    return tuple(grads)
