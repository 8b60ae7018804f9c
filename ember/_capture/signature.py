"""What a call of a captured function is made of: its signature (the cache key) and its leaves.

A call's arguments are walked once, in order, through tuples, lists, dicts and
``GradientsParams``. Each leaf is one of:

- a ``Tensor``: an input (its shape, dtype, device, strategy and require-grad flag are keyed);
- a Python ``int`` or ``float`` (not ``bool``): an input too; only its *type* is keyed, so a new
  learning rate every step never records again;
- a ``Module``: state; keyed by identity and structure (each parameter's ``ParamId``, shape,
  dtype, device, strategy, trainability; each buffer's name, shape, dtype; the training flags);
- an ``Optimizer``: state; keyed by identity and the layout of its per-parameter state;
- anything else (``None``, ``bool``, strings, functions, other objects): a constant of the
  recording, keyed by value when hashable, else by identity.

The active autocast policy is part of every key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._core.dispatch import autocast_policy
from .._core.internal import leaf_id
from .._core.tensor import Tensor
from ..nn.module import Module
from ..optim.base import Optimizer
from ..optim.grads import GradientsParams

# how a container is rebuilt: (kind, extra, children)
Spec = tuple[str, Any, tuple[Any, ...]]
_LEAF: Spec = ("leaf", None, ())


@dataclass
class Leaves:
    """The leaves of one call, in walk order, by role."""

    values: list[Any] = field(default_factory=list)  # every leaf, in order
    tensors: list[int] = field(default_factory=list)  # positions in ``values``
    numbers: list[int] = field(default_factory=list)
    modules: list[Module] = field(default_factory=list)
    optimizers: list[Optimizer] = field(default_factory=list)


def tensor_key(t: Tensor) -> tuple[Any, ...]:
    """Shape, dtype, device, strategy and require-grad flag (read from the slots: this runs for
    every tensor of every call, so it must cost next to nothing)."""
    raw = t._raw
    return (tuple(raw.shape), raw.dtype, t._hardware, t._ckpt_strategy, leaf_id(t) is not None)


def module_key(m: Module) -> tuple[Any, ...]:
    """A module's structure: what a recording of code that reads it depends on: each
    parameter's ``ParamId``, trainability and ``tensor_key``, each buffer's owner, name, shape,
    dtype and device, each sub-module's training flag (one walk, as ``Module.parameters``)."""
    params: list[Any] = []
    buffers: list[Any] = []
    flags: list[bool] = []
    seen: set[int] = set()
    stack: list[Module] = [m]
    while stack:
        sub = stack.pop()
        if id(sub) in seen:
            continue
        seen.add(id(sub))
        d = sub.__dict__
        flags.append(d["training"])
        for n in d["_param_names"]:
            p = d[n]
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                params.append((p.id, p.is_trainable(), *tensor_key(p.val())))
        for n in d["_buffer_names"]:
            b = d[n]
            if b is not None:
                buffers.append((id(sub), n, tuple(b._raw.shape), b._raw.dtype, b._hardware))
        stack.extend(d[k] for k in reversed(d["_module_names"]))
    return ("M", id(m), tuple(params), tuple(buffers), tuple(flags))


def optimizer_key(o: Optimizer) -> tuple[Any, ...]:
    """An optimizer's state layout; an integer count and a 0-d integer tensor count are the
    same entry (a recording keeps counts on the device)."""
    rows = []
    for pid, state in o._state.items():
        entries: list[tuple[Any, ...]] = []
        for k, v in state.items():
            if isinstance(v, Tensor) and not (v.ndim == 0 and not v.dtype.is_float):
                entries.append((k, tuple(v._raw.shape), v._raw.dtype, v._hardware))
            else:
                entries.append((k, "count"))
        rows.append((pid, tuple(entries)))
    return ("O", id(o), type(o).__name__, tuple(rows), o.grad_clipping is None)


def _constant_key(v: Any) -> Any:
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return ("c", type(v).__name__, v)


def walk(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Spec, Leaves]:
    """The signature of a call, how to rebuild its arguments, and its leaves."""
    leaves = Leaves()
    key: list[Any] = []
    spec = _walk((args, kwargs), key, leaves)
    key.append(("amp", _constant_key(autocast_policy())))
    return tuple(key), spec, leaves


def _walk(obj: Any, key: list[Any], leaves: Leaves) -> Spec:
    t = type(obj)
    if t is tuple or t is list:
        key.append((t.__name__, len(obj)))
        return (t.__name__, None, tuple(_walk(o, key, leaves) for o in obj))
    if t is dict:
        names = tuple(obj)
        key.append(("dict", names))
        return ("dict", names, tuple(_walk(obj[n], key, leaves) for n in names))
    if isinstance(obj, GradientsParams):
        ids = tuple(obj._grads)
        key.append(("grads", tuple(str(i) for i in ids)))
        return ("grads", ids, tuple(_walk(obj._grads[i], key, leaves) for i in ids))
    pos = len(leaves.values)
    leaves.values.append(obj)
    if isinstance(obj, Tensor):
        leaves.tensors.append(pos)
        key.append(("T", *tensor_key(obj)))
    elif t is float or t is int:
        leaves.numbers.append(pos)
        key.append(("n", t.__name__))
    elif isinstance(obj, Module):
        leaves.modules.append(obj)
        key.append(module_key(obj))
    elif isinstance(obj, Optimizer):
        leaves.optimizers.append(obj)
        key.append(optimizer_key(obj))
    else:
        key.append(_constant_key(obj))
    return _LEAF


def rebuild(spec: Spec, values: list[Any]) -> Any:
    """The structure ``spec`` describes, with ``values`` as its leaves (in walk order)."""
    it = iter(values)
    return _rebuild(spec, it.__next__)


def _rebuild(spec: Spec, take: Callable[[], Any]) -> Any:
    kind, extra, children = spec
    if kind == "leaf":
        return take()
    items = [_rebuild(c, take) for c in children]
    if kind == "tuple":
        return tuple(items)
    if kind == "list":
        return items
    if kind == "dict":
        return dict(zip(extra, items))
    out = GradientsParams()
    out._grads.update(zip(extra, items))
    return out


def state_of_closure(fn: Callable[..., Any]) -> tuple[list[Module], list[Optimizer]]:
    """Modules and optimizers ``fn`` reads without taking them as arguments: its closure
    variables and, for a bound method, the attributes of its object (one level deep)."""
    found: list[Any] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        found.append(owner)
        found.extend(getattr(owner, "__dict__", {}).values())
    modules = [o for o in found if isinstance(o, Module)]
    optimizers = [o for o in found if isinstance(o, Optimizer)]
    return modules, optimizers
