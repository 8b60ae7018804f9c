"""Op dispatch: every Tensor method ends here.

Front halves per arity (``apply``, ``apply1``, ``apply2``, ``binary``, ``scalar``, ``record``)
collect the raw operands, check devices, strategies and dtype domains, and run the row's forward.
Two functions are shared by all of them: ``_autocast`` (called before the kernel when the row's
``precision`` asks) and ``_record``, the one place an autodiff result and its graph node are built.
Plain operands pay no autodiff cost; untracked autodiff operands record nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import replace
from numbers import Number
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..autodiff.node import Node
from ..checkpoint import record as _checkpoint
from ..dtype import DType, promote, scalar_dtype
from ..errors import DTypeError
from ..ops.registry import OPS, Domain, OpSpec, Precision
from . import checks

if TYPE_CHECKING:
    from .tensor import Tensor

_ANY = Domain.ANY
_KEEP = Precision.KEEP
_new = object.__new__
_node_of = attrgetter("_node")
_shape_of = attrgetter("shape")
_NO_ATTRS: dict[str, Any] = {}
# one shared tuple per distinct tuple of input shapes: a node keeps the shared one, so the shape
# objects a recording makes (a tuple and a ``torch.Size`` per input) die at once instead of
# living with the graph, where they were a third of the objects the garbage collector tracks
# (fewer collections, and fewer survivors promoted towards the full ones)
_SHAPES: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_SHAPES_MAX = 4096
# the active mixed-precision policy, set by ``ember.amp.autocast``: (spec, tensors) -> tensors
# cast to the dtypes the policy computes ``spec`` in. A context variable, so a policy entered in
# one thread (or asyncio task) never reaches another: new threads start outside autocast. Read by
# ``_autocast`` (and reported by ``autocast_policy``) only, so where the policy lives is decided
# in these three functions.
_policy: ContextVar[Any] = ContextVar("ember_autocast", default=None)
_policy_get = _policy.get


def autocast_policy() -> Any:
    """The active autocast policy of the calling thread or task, or ``None``."""
    return _policy_get()


def set_autocast(policy: Any) -> Any:
    """Make ``policy`` (or ``None``) the calling context's autocast policy; returns the previous."""
    previous = _policy_get()
    _policy.set(policy)
    return previous


def _autocast(spec: OpSpec, xs: Any) -> Any:
    """The autocast decision, for every entry point: ``xs`` as the active policy computes ``spec``.

    Entry points call it before their kernel runs when the row's ``precision`` asks for it
    (``spec.autocasts``: LOW or FULL; FOLLOW rows only when their float operands differ in dtype).
    Outside autocast it returns ``xs`` unchanged.
    """
    policy = _policy_get()
    if policy is None:
        return xs
    return policy(spec, xs)


def wrap(cls: type[Tensor], data: Any, dev: Any, strategy: Any = None, node: Any = None) -> Tensor:
    t = _new(cls)
    t._data = data
    t._dev = dev
    t._strategy = strategy
    t._node = node
    return t


def apply(spec: OpSpec, xs: tuple[Tensor, ...] | list[Tensor], attrs: dict[str, Any]) -> Tensor:
    """Run ``spec`` on tensors ``xs`` (one per input; all of a list-input op's tensors)."""
    if spec.precision is not _KEEP:
        xs = _autocast(spec, xs)
    if len(xs) == 1 and spec.arity == 1:
        return _apply1(spec, xs[0], attrs)
    t0 = xs[0]
    dev = t0._dev
    strategy = t0._strategy
    raws = []
    parents = []
    for x in xs:
        if x._dev is not dev:
            checks.same_device(spec.name, dev, x._dev)
        s = x._strategy
        if s is not strategy and s is not None:
            if strategy is None:
                strategy = s
            elif s != strategy:  # strategies compare by value
                raise checks.same_strategy(spec.name, strategy, s)
        raws.append(x._data)
        parents.append(x._node)
    b = dev.b
    if spec.dtypes is not _ANY:
        is_float = b.is_float
        for x in xs:  # a tracked tensor is float: only leaves and float results carry nodes
            if x._node is None and not is_float(x._data):
                checks.dtype_domain(spec.name, spec.dtypes, b.dtype_of(x._data))
    fn = b.table[spec.name]
    if spec.arity == -1:
        out = fn(raws, **attrs)
    elif attrs:
        out = fn(*raws, **attrs)
    else:
        out = fn(*raws)
    if type(out) is not b.array_type:
        if spec.saves_residuals:
            return _residuals(
                spec, t0.__class__, tuple(parents), tuple(raws), out, attrs, strategy, dev
            )
        out = b.asarray(out)
    if strategy is None:
        return wrap(t0.__class__, out, dev)
    return _record(spec, t0.__class__, tuple(parents), tuple(raws), out, attrs, strategy, dev)


def apply1(spec: OpSpec, x: Tensor, attrs: dict[str, Any]) -> Tensor:
    """``apply`` for one input: the hot path of unary and layout ops."""
    if spec.autocasts:
        x = _autocast(spec, (x,))[0]
    return _apply1(spec, x, attrs)


def _apply1(spec: OpSpec, x: Tensor, attrs: dict[str, Any]) -> Tensor:
    data = x._data
    dev = x._dev
    b = dev.b
    if spec.dtypes is not _ANY and x._node is None and not b.is_float(data):
        checks.dtype_domain(spec.name, spec.dtypes, b.dtype_of(data))
    if attrs:
        out = b.table[spec.name](data, **attrs)
    else:
        out = b.table[spec.name](data)
    if type(out) is not b.array_type:
        if spec.saves_residuals:
            return _residuals(spec, x.__class__, (x._node,), (data,), out, attrs, x._strategy, dev)
        out = b.asarray(out)
    strategy = x._strategy
    if strategy is None:
        return wrap(x.__class__, out, dev)
    return _record(spec, x.__class__, (x._node,), (data,), out, attrs, strategy, dev)


def record(
    spec: OpSpec,
    xs: Any,
    raws: Any,
    out: Any,
    attrs: dict[str, Any],
    strategy: Any,
    dev: Any,
) -> Tensor:
    """Wrap ``out``, computed from tensors ``xs`` (raw ``raws``), as an autodiff result."""
    return _record(
        spec, xs[0].__class__, tuple(map(_node_of, xs)), tuple(raws), out, attrs, strategy, dev
    )


def _record(
    spec: OpSpec,
    cls: type[Tensor],
    parents: tuple[Node | None, ...],
    raws: tuple[Any, ...],
    out: Any,
    attrs: dict[str, Any],
    strategy: Any,
    dev: Any,
    saved: Any = None,
) -> Tensor:
    """The one recorder: every entry point's autodiff result is built here.

    ``out`` was computed from ``raws`` (one per input; ``parents`` their nodes). A node is added
    when the row is differentiable, some input is tracked and the result is float; what it keeps
    (its inputs, its output, or only a recipe) is the strategy's decision: a strategy that never
    makes recipes (``recipes`` unset: ``Disabled``) keeps what the row's ``saves`` names, any other
    is asked by ``ember.checkpoint.record.node``. ``saved``: the residuals a ``Saves.RESIDUALS``
    forward returned (kept on the node as ``ctx.saved`` under every strategy).
    """
    t = _new(cls)
    t._data = out
    t._dev = dev
    t._strategy = strategy
    b = dev.b
    if spec.backward is None or parents.count(None) == len(parents) or not b.is_float(out):
        t._node = None
        return t
    if strategy.recipes:
        t._node = _checkpoint.node(strategy, spec, parents, raws, out, attrs, b, saved)
        return t
    shapes = tuple(map(_shape_of, raws))
    shared = _SHAPES.get(shapes)
    if shared is None:
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        shared = _SHAPES.setdefault(shapes, shapes)
    n = t._node = Node(
        spec,
        parents,
        raws if spec.saves_inputs else None,
        out if spec.saves_output else None,
        attrs,
        shared,
        b,
    )
    if saved is not None:
        n.saved = saved
    return t


def _residuals(
    spec: OpSpec,
    cls: type[Tensor],
    parents: tuple[Node | None, ...],
    raws: tuple[Any, ...],
    result: Any,
    attrs: dict[str, Any],
    strategy: Any,
    dev: Any,
) -> Tensor:
    """The result of a ``Saves.RESIDUALS`` row, whose forward returned ``(out, saved)``: ``out``
    as the tensor, ``saved`` for its node (an entry point's kernel-output branch calls this)."""
    out, saved = result
    b = dev.b
    if type(out) is not b.array_type:
        out = b.asarray(out)
    if strategy is None:
        return wrap(cls, out, dev)
    return _record(spec, cls, parents, raws, out, attrs, strategy, dev, saved)


def cast(x: Tensor, dtype: DType) -> Tensor:
    src = x.dtype
    if src is dtype:
        return x
    return apply(OPS["cast"], (x,), {"dtype": dtype, "src": src})


def unify(spec: OpSpec, xs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Float operands of ``spec`` brought to one dtype before a fused row runs.

    Under ``autocast`` the policy picks the dtype first (a bfloat16 activation and a float32
    weight of a matmul both go to bfloat16, with no float32 round trip); whatever still differs
    is cast to the promoted dtype.
    """
    xs = tuple(_autocast(spec, xs))
    dt = xs[0].dtype
    for x in xs[1:]:
        if x.dtype is not dt:
            dt = promote(dt, x.dtype)
    return tuple([cast(x, dt) for x in xs])


def binary(spec: OpSpec, a: Tensor, c: Tensor) -> Tensor:
    """Elementwise op of two tensors: dtype promotion and broadcasting checks, then ``apply2``."""
    x = a._data
    y = c._data
    if x.dtype != y.dtype and spec.precision is not _KEEP:
        # FOLLOW rows (a bias joins a low-precision operand) decide only for different dtypes;
        # LOW and FULL rows are decided by ``apply2``
        a, c = _autocast(spec, (a, c))
        x = a._data
        y = c._data
    if x.dtype != y.dtype:
        da, dc = a.dtype, c.dtype
        if da.is_float and dc.is_float and spec.name in ARITHMETIC_OPS:
            # the kernel promotes in-register: no float32 copy of the narrower operand
            spec = _mixed(spec, da, dc)
        else:
            dt = promote(da, dc)
            a = cast(a, dt)
            c = cast(c, dt)
            x = a._data
            y = c._data
    if x.shape != y.shape:
        checks.broadcast_shapes(spec.name, tuple(x.shape), tuple(y.shape))
    return apply2(spec, a, c)


# elementwise arithmetic rows: their kernels (NumPy and PyTorch alike) take two float dtypes and
# compute in the promoted one, as ember's promotion rules do (amp's bias rule uses the same set)
ARITHMETIC_OPS = frozenset({"add", "sub", "mul", "div"})
_MIXED_SPECS: dict[tuple[str, DType, DType], OpSpec] = {}


def _mixed(spec: OpSpec, da: DType, dc: DType) -> OpSpec:
    """``spec`` for operands of float dtypes ``da`` and ``dc`` (they differ).

    The same row (name, kernel, cost class, saved values), whose backward hands each input its
    gradient in that input's own dtype, summed over broadcast dims first: the values the
    cast-then-op graph gives, without its float32 copy of the narrower operand.
    """
    key = (spec.name, da, dc)
    m = _MIXED_SPECS.get(key)
    if m is not None:
        return m
    rule = spec.backward
    assert rule is not None
    want = (da, dc)

    def backward(ctx: Any, grad: Any) -> Any:
        b = ctx.b
        out = []
        for g, d, shape in zip(rule(ctx, grad), want, ctx.shapes):
            if g is not None and b.dtype_of(g) is not d:
                if g.shape != shape:  # sum a broadcast gradient in the wide dtype, then cast
                    g = b.sum_to_shape(g, shape)
                g = b.cast(g, d)
            out.append(g)
        return tuple(out)

    m = _MIXED_SPECS.setdefault(key, replace(spec, backward=backward))
    return m


def apply2(spec: OpSpec, a: Tensor, c: Tensor) -> Tensor:
    """``apply`` for two inputs whose dtypes and shapes the caller has checked (binary, matmul)."""
    if spec.autocasts:
        a, c = _autocast(spec, (a, c))
    x = a._data
    y = c._data
    dev = a._dev
    if c._dev is not dev:
        checks.same_device(spec.name, dev, c._dev)
    b = dev.b
    if spec.dtypes is not _ANY and a._node is None and not b.is_float(x):
        checks.dtype_domain(spec.name, spec.dtypes, b.dtype_of(x))
    out = b.table[spec.name](x, y)
    strategy = a._strategy
    sc = c._strategy
    if sc is not strategy:
        if strategy is None:
            strategy = sc
        elif sc is not None and sc != strategy:  # strategies compare by value
            raise checks.same_strategy(spec.name, strategy, sc)
    if type(out) is not b.array_type:
        if spec.saves_residuals:
            return _residuals(spec, a.__class__, (a._node, c._node), (x, y), out, {}, strategy, dev)
        out = b.asarray(out)
    if strategy is None:
        return wrap(a.__class__, out, dev)
    return _record(spec, a.__class__, (a._node, c._node), (x, y), out, _NO_ATTRS, strategy, dev)


_I64 = 1 << 63


def _int_range(op: str, value: int) -> DTypeError:
    return DTypeError(
        f"{op}: the int {checks.show(value)} is outside the int64 range (-2**63..2**63-1), the "
        "widest ember int; no dtype holds it. Pass float(value) for float math."
    )


def as_scalar(op: str, value: Any) -> int | float | bool:
    """A Python number from ``value`` (Python or NumPy scalar), or a ``DTypeError``.

    NumPy scalars become Python numbers, so they never change a tensor's dtype either
    (``np.float64`` subclasses ``float`` but would otherwise upcast a float32 array).
    """
    tv = type(value)
    if tv is float or tv is bool:
        return value
    if tv is int:
        if -_I64 <= value < _I64:
            return value
        raise _int_range(op, value)
    if isinstance(value, np.generic):
        item = value.item()
        if isinstance(item, (bool, int, float)):
            return as_scalar(op, item)
    elif isinstance(value, bool):
        return bool(value)
    elif isinstance(value, int):
        return as_scalar(op, int(value))
    elif isinstance(value, Number):
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
    if getattr(value, "is_quantized", None) is not None:  # a QuantizedTensor operand
        raise DTypeError(
            f"{op}: expected a Tensor or a Python number, got a quantized tensor; only layout "
            "ops, matmul, F.linear and F.embedding take one. Call q.dequantize() first."
        )
    raise DTypeError(
        f"{op}: expected a Tensor or a Python number, got {type(value).__name__}. "
        "Wrap arrays with em.tensor(...) first."
    )


def scalar(spec: OpSpec, x: Tensor, value: Any) -> Tensor:
    """``x <op> value`` for a Python scalar: the tensor's dtype wins (a float lifts ints)."""
    tv = type(value)
    if (tv is float or (tv is int and -_I64 <= value < _I64)) and not spec.autocasts:
        data = x._data
        dev = x._dev
        b = dev.b
        if b.scalar_ok(data):  # the common case: a float tensor keeps its dtype
            out = b.table[spec.name](data, value)
            strategy = x._strategy
            if type(out) is not b.array_type:
                if spec.saves_residuals:
                    node = (x._node,)
                    at = {"value": value}
                    return _residuals(spec, x.__class__, node, (data,), out, at, strategy, dev)
                out = b.asarray(out)
            if strategy is None:
                return wrap(x.__class__, out, dev)
            return _record(
                spec, x.__class__, (x._node,), (data,), out, {"value": value}, strategy, dev
            )
    value = as_scalar(spec.name, value)
    dt = x.dtype
    want = scalar_dtype(dt, value)
    if want.kind != "b":  # an int32 holds less than int64; a float beyond float32 is inf
        value = checks.fit(spec.name, value, want)
    if want is not dt:
        x = cast(x, want)
    if want.is_float:  # a scalar of the tensor's own dtype, so no kernel upcasts (bfloat16)
        value = x._dev.b.scalar(value, x._data)
    return apply1(spec, x, {"value": value})
