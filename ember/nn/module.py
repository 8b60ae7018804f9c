"""``Module``: the base class of layers and models (SEMANTICS.md §8).

A module tracks the ``Param``, ``Module`` and buffer attributes assigned to it, in assignment
order, and names them with dotted paths (``fc1.weight``). Tensors are immutable, so parameters are
replaced inside their ``Param`` slots; structure-changing calls (``fork``, ``to_device``) return a
new module and leave the source unchanged.

Shared parameters: one ``Param`` object assigned in two places (tied embeddings,
``model.lm_head.weight = model.wte.weight``) is one parameter everywhere. ``parameters()`` and
``named_parameters()`` yield it once, under its first name (as PyTorch), so ``num_params``,
optimizers, gradients and records count, update and store it once; ``fork`` and ``to_device``
keep the two places sharing one ``Param`` in the copy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .._core.device import Device
from .._core.tensor import Tensor
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..errors import DTypeError, ShapeError
from .hooks import ForwardHooks, HookHandle
from .param import Param, ParamId, _relift

_Strategy = GradientCheckpointingStrategy


class Module:
    """Base class of every layer and model.

    Subclasses call ``super().__init__()`` first, assign ``Param``s, sub-modules and buffers as
    attributes, and implement ``forward``. ``module(x)`` calls ``forward``.

    Training state (SEMANTICS.md §8):
        * ``valid()`` makes parameters plain tensors and turns training flags off, remembering the
          configured trainability, flags and strategy; ``train()`` restores them (autodiff on).
        * ``no_grad()`` / ``set_require_grad(flag)`` switch trainability persistently;
          ``freeze()`` / ``unfreeze()`` switch trainability and training flags.
        * ``self.training`` is the flag layers read (dropout, batch-norm statistics).

    Example:
        >>> class Mlp(Module):
        ...     def __init__(self, device=None):
        ...         super().__init__()
        ...         self.l1 = Linear(4, 8, device=device)
        ...         self.l2 = Linear(8, 2, device=device)
        ...     def forward(self, x):
        ...         return self.l2(F.relu(self.l1(x)))
        >>> [name for name, _ in Mlp().named_parameters()]
        ['l1.weight', 'l1.bias', 'l2.weight', 'l2.bias']
    """

    training: bool
    _training_cfg: bool
    _call_hooks: ForwardHooks | None = None  # forward (pre-)hooks; set on the instance

    def __init__(self) -> None:
        object.__setattr__(self, "_param_names", [])
        object.__setattr__(self, "_module_names", [])
        object.__setattr__(self, "_buffer_names", [])
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_training_cfg", True)

    # ------------------------------------------------------------------ attribute tracking
    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if "_param_names" not in d:
            raise AttributeError(
                f"{type(self).__name__}.{name}: the module is not initialised. Call "
                "super().__init__() at the start of __init__ before assigning attributes."
            )
        params, modules, buffers = d["_param_names"], d["_module_names"], d["_buffer_names"]
        if isinstance(value, Param):
            self._untrack(name)
            params.append(name)
        elif isinstance(value, Module):
            self._untrack(name)
            modules.append(name)
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise DTypeError(
                    f"{type(self).__name__}.{name}: expected a Tensor for a buffer, got "
                    f"{type(value).__name__}."
                )
        elif name in params or name in modules:
            if isinstance(value, Tensor):
                raise DTypeError(
                    f"{type(self).__name__}.{name}: expected a Param, got a Tensor. Wrap it: "
                    f"self.{name} = em.nn.Param(tensor), or use load_state_dict."
                )
            self._untrack(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._untrack(name)
        object.__delattr__(self, name)

    def _untrack(self, name: str) -> None:
        for key in ("_param_names", "_module_names", "_buffer_names"):
            names = self.__dict__[key]
            if name in names:
                names.remove(name)

    def register_buffer(self, name: str, value: Tensor | None) -> None:
        """Track ``value`` as non-trainable state (saved, moved, never optimized).

        Buffers are plain tensors such as batch-norm running statistics.
        """
        if value is not None and not isinstance(value, Tensor):
            raise DTypeError(f"register_buffer: expected a Tensor, got {type(value).__name__}.")
        self._untrack(name)
        self.__dict__["_buffer_names"].append(name)
        object.__setattr__(self, name, None if value is None else value.without_autodiff())

    # ------------------------------------------------------------------ calling
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise NotImplementedError(
            f"{type(self).__name__}.forward: not defined. Subclasses of Module implement forward."
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._call_hooks is None:  # the hot path: one attribute read when no hook is set
            return self.forward(*args, **kwargs)
        return self._call_hooks.call(self, args, kwargs)

    def register_forward_pre_hook(
        self, hook: Callable[[Module, tuple[Any, ...]], Any]
    ) -> HookHandle:
        """Run ``hook(module, args)`` before each ``forward``; a non-``None`` result replaces
        the positional args (a non-tuple is one arg). Keyword args pass through unseen.
        Returns a handle whose ``remove()`` unregisters it."""
        return self._hooks_for("register_forward_pre_hook", hook).add(self, "pre", hook)

    def register_forward_hook(
        self, hook: Callable[[Module, tuple[Any, ...], Any], Any]
    ) -> HookHandle:
        """Run ``hook(module, args, output)`` after each ``forward``; a non-``None`` result
        replaces the output. ``args`` are the positional args forward got (after pre-hooks).
        Returns a handle whose ``remove()`` unregisters it."""
        return self._hooks_for("register_forward_hook", hook).add(self, "post", hook)

    def _hooks_for(self, op: str, hook: Any) -> ForwardHooks:
        if not callable(hook):
            raise DTypeError(f"{op}: expected a callable hook, got {type(hook).__name__}.")
        hooks = self._call_hooks
        if hooks is None:
            hooks = ForwardHooks()
            object.__setattr__(self, "_call_hooks", hooks)
        return hooks

    # ------------------------------------------------------------------ traversal
    def named_children(self) -> Iterator[tuple[str, Module]]:
        d = self.__dict__
        for name in d["_module_names"]:
            yield name, d[name]

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module (named ``prefix``) and every sub-module, depth first."""
        yield prefix, self
        for name, m in self.named_children():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every sub-module (children first, depth first), then on this module;
        returns this module, as PyTorch's ``Module.apply``. A module reachable twice is visited
        once.

        Example:
            >>> seen = []
            >>> _ = Sequential(Linear(2, 2), ReLU()).apply(lambda m: seen.append(type(m).__name__))
            >>> seen
            ['Linear', 'ReLU', 'Sequential']
        """
        if not callable(fn):
            raise DTypeError(
                f"Module.apply: expected a callable fn(module), got {type(fn).__name__}. Pass a "
                "function such as lambda m: ... (to change parameters, assign them in fn)."
            )
        self._apply_once(fn, set())
        return self

    def _apply_once(self, fn: Callable[[Module], Any], seen: set[int]) -> None:
        seen.add(id(self))
        for m in self.children():
            if id(m) not in seen:
                m._apply_once(fn, seen)
        fn(self)

    def named_parameters(
        self, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Param]]:
        """``(dotted name, Param)`` pairs in assignment order, sub-modules depth first.

        A ``Param`` reachable under several names (a tied weight) comes once, under the first;
        ``remove_duplicate=False`` yields every name (its aliases too), as PyTorch's flag.
        """
        seen: set[int] | None = set() if remove_duplicate else None
        return self._named_parameters(prefix, seen)

    def _named_parameters(self, prefix: str, seen: set[int] | None) -> Iterator[tuple[str, Param]]:
        d = self.__dict__
        for name in d["_param_names"]:
            p = d[name]
            if seen is not None:
                if id(p) in seen:
                    continue
                seen.add(id(p))
            yield (f"{prefix}.{name}" if prefix else name), p
        for name in d["_module_names"]:
            yield from d[name]._named_parameters(f"{prefix}.{name}" if prefix else name, seen)

    def parameters(self) -> Iterator[Param]:
        """Every ``Param`` once, in ``named_parameters`` order (walked without building names)."""
        seen: set[int] = set()
        stack: list[Module] = [self]
        while stack:
            d = stack.pop().__dict__
            for name in d["_param_names"]:
                p = d[name]
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p
            stack.extend(d[m] for m in reversed(d["_module_names"]))

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        d = self.__dict__
        for name in d["_buffer_names"]:
            if d[name] is not None:
                yield (f"{prefix}.{name}" if prefix else name), d[name]
        for name in d["_module_names"]:
            yield from d[name].named_buffers(f"{prefix}.{name}" if prefix else name)

    def num_params(self) -> int:
        """Number of scalar values in all parameters (buffers excluded; a shared one once)."""
        return sum(p.numel() for p in self.parameters())

    def devices(self) -> list[Device]:
        """The distinct (plain) devices holding parameters or buffers, in first-seen order."""
        out: list[Device] = []
        for p in self.parameters():
            d = p.val().device.without_autodiff()
            if d not in out:
                out.append(d)
        for _, b in self.named_buffers():
            d = b.device.without_autodiff()
            if d not in out:
                out.append(d)
        return out

    # ------------------------------------------------------------------ training state
    def train(self) -> Module:
        """Autodiff on with the remembered strategy; trainability and training flags restored."""
        for m in self.modules():
            object.__setattr__(m, "training", m._training_cfg)
        for p in self.parameters():
            strategy = (
                p.val().gradient_checkpointing_strategy() or p._train_strategy or _Strategy.Disabled
            )
            p._train_strategy = strategy
            p._value = _relift(p._value, strategy, p._trainable)
        return self

    def valid(self) -> Module:
        """Plain parameters, no gradients, training flags off (idempotent).

        The configured trainability, flags and strategy are remembered for ``train()``.
        """
        for m in self.modules():
            object.__setattr__(m, "training", False)
        for p in self.parameters():
            s = p._value.gradient_checkpointing_strategy()
            if s is not None:
                p._train_strategy = s
                p._value = p._value.without_autodiff()
        return self

    def eval(self) -> Module:
        """PyTorch's spelling of ``valid()``: plain parameters, no gradients, training flags
        off; ``train()`` switches back."""
        return self.valid()

    def set_require_grad(self, flag: bool) -> Module:
        """Configure every parameter as trainable (``True``) or not; persists across modes."""
        for p in self.parameters():
            p._trainable = bool(flag)
            s = p._value.gradient_checkpointing_strategy()
            if s is not None:
                p._value = _relift(p._value, s, p._trainable)
        return self

    def no_grad(self) -> Module:
        """Turn trainability off persistently (``valid()``/``train()`` keep it off)."""
        return self.set_require_grad(False)

    def freeze(self) -> Module:
        """Trainability and training flags off (gradients still flow through to inputs)."""
        for m in self.modules():
            object.__setattr__(m, "_training_cfg", False)
            object.__setattr__(m, "training", False)
        return self.set_require_grad(False)

    def unfreeze(self) -> Module:
        """Trainability and training flags back on."""
        for m in self.modules():
            object.__setattr__(m, "_training_cfg", True)
            object.__setattr__(m, "training", True)
        return self.set_require_grad(True)

    # ------------------------------------------------------------------ copies and moves
    def _clone(
        self,
        fp: Callable[[Param], Param],
        fb: Callable[[Tensor], Tensor],
        memo: dict[int, Any] | None = None,
    ) -> Module:
        """A copy with ``fp`` applied to each parameter and ``fb`` to each buffer; a ``Param`` or
        ``Module`` reachable from two places is copied once (``memo``: id of old -> copy), so
        the copy shares what the source shares."""
        if memo is None:
            memo = {}
        new = object.__new__(type(self))
        memo[id(self)] = new
        d = dict(self.__dict__)
        if d.get("_call_hooks") is not None:  # the copy runs the same hooks, held apart
            d["_call_hooks"] = d["_call_hooks"].copy()
        for key in ("_param_names", "_module_names", "_buffer_names"):
            d[key] = list(d[key])
        for name in d["_param_names"]:
            p = d[name]
            q = memo.get(id(p))
            if q is None:
                q = memo[id(p)] = fp(p)
            d[name] = q
        for name in d["_module_names"]:
            m = d[name]
            c = memo.get(id(m))
            d[name] = c if c is not None else m._clone(fp, fb, memo)
        for name in d["_buffer_names"]:
            if d[name] is not None:
                d[name] = fb(d[name])
        new.__dict__.update(d)
        return new

    def fork(self, device: Device) -> Module:
        """An independent copy on ``device`` whose parameters are fresh leaves (same ids).

        The copy keeps each parameter's autodiff context, except that an autodiff ``device``
        makes every parameter autodiff with that device's strategy. Used to run replicas.
        """
        _check_device("fork", device)
        plain = device.without_autodiff()
        dev_strategy = device.gradient_checkpointing_strategy()

        def fp(p: Param) -> Param:
            moved = p._value.without_autodiff().to_device(plain)
            s = dev_strategy or p._value.gradient_checkpointing_strategy()
            q = p._copy(_relift(moved, s, p._trainable))
            if dev_strategy is not None:
                q._train_strategy = dev_strategy
            return q

        return self._clone(fp, lambda b: b.to_device(plain))

    def to_device(self, device: Device) -> Module:
        """A copy whose tensors are moved to ``device`` with ``Tensor.to_device`` (same ids).

        The move is recorded: gradients of a loss on the copy flow back to this module's
        require-grad parameters. To train on ``device`` itself, use ``fork(device)``.
        """
        _check_device("to_device", device)
        return self._clone(
            lambda p: p._copy(p._value.to_device(device)), lambda b: b.to_device(device)
        )

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Tensor]:
        """Dotted name -> plain tensor, for every parameter and buffer (a shared parameter once,
        under its first name; ``load_state_dict`` fills every place that shares it)."""
        out = {name: p.val().without_autodiff() for name, p in self.named_parameters()}
        out.update(self.named_buffers())
        return out

    def load_state_dict(
        self,
        state: Mapping[str, Tensor | np.ndarray],
        *,
        strict: bool = True,
        ids: Mapping[str, ParamId] | None = None,
    ) -> Module:
        """Replace parameter and buffer values (in place); returns this module.

        Each value moves to its parameter's device and takes the parameter's autodiff context.
        A shared (tied) parameter is loaded once and so fills every place that shares it; a
        record that also holds it under a later name (PyTorch's ``state_dict`` does) loads when
        both entries are equal, and raises ``RecordError`` when they differ (an untied record).

        Args:
            state: Dotted name -> tensor or NumPy array.
            strict: Reject missing and unexpected names (shapes and dtypes are always checked).
            ids: Optional ``ParamId``s to restore (as saved by ``save``).

        Raises:
            RecordError: Names are missing or unexpected (all of them are listed).
            ShapeError: Shapes differ (all mismatches listed).
            DTypeError: Dtypes differ (all mismatches listed).
        """
        from ..record.errors import RecordError

        params = dict(self.named_parameters())
        tied = self._tied_names()
        if tied and any(n in state for n in tied):
            state = _fold_tied(state, tied)
        buffers = dict(self.named_buffers())
        expected = {n: (p.shape, p.dtype) for n, p in params.items()}
        expected.update({n: (b.shape, b.dtype) for n, b in buffers.items()})
        missing = [n for n in expected if n not in state]
        unexpected = [n for n in state if n not in expected]
        if strict and (missing or unexpected):
            raise RecordError(
                f"load_state_dict: names differ from {type(self).__name__}'s; missing: "
                f"{missing or 'none'}; unexpected: {unexpected or 'none'}. Check the layer names, "
                "remap keys (em.record.load_pytorch(key_map=...)) or pass strict=False."
            )
        values: dict[str, Tensor] = {}
        bad_shapes, bad_dtypes = [], []
        for name, (shape, dtype) in expected.items():
            if name not in state:
                continue
            v = state[name]
            t = v if isinstance(v, Tensor) else Tensor.from_data(np.asarray(v))
            if t.shape != shape:
                bad_shapes.append(f"{name}: expected {shape}, got {t.shape}")
            elif t.dtype is not dtype:
                bad_dtypes.append(f"{name}: expected {dtype.name}, got {t.dtype.name}")
            values[name] = t
        if bad_shapes:
            raise ShapeError(
                f"load_state_dict: shapes differ: {'; '.join(bad_shapes)}. The record was saved "
                "from a differently configured model."
            )
        if bad_dtypes:
            raise DTypeError(
                f"load_state_dict: dtypes differ: {'; '.join(bad_dtypes)}. Build the model with "
                "the record's dtype, or cast the values before loading."
            )
        for name, t in values.items():
            if name in params:
                p = params[name]
                p._replace(t.without_autodiff().to_device(p.val().device.without_autodiff()))
                if ids is not None and name in ids:
                    p.id = ids[name]
            else:
                owner, attr = self._owner(name)
                old = buffers[name]
                object.__setattr__(owner, attr, t.without_autodiff().to_device(old.device))
        return self

    def _tied_names(self) -> dict[str, str]:
        """Each later name of a shared ``Param`` -> its first name (empty when none is shared)."""
        first: dict[int, str] = {}
        out: dict[str, str] = {}
        for name, p in self.named_parameters(remove_duplicate=False):
            f = first.setdefault(id(p), name)
            if f != name:
                out[name] = f
        return out

    def _owner(self, dotted: str) -> tuple[Module, str]:
        *path, attr = dotted.split(".")
        m: Module = self
        for part in path:
            m = m.__dict__[part]
        return m, attr

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write parameters, buffers and parameter ids to a safetensors file (atomically)."""
        from ..record.safetensors import save_module

        save_module(self, path)

    def load(self, path: str | os.PathLike[str]) -> Module:
        """Load a file written by ``save`` into this module (in place); returns the module."""
        from ..record.safetensors import load_module

        return load_module(self, path)

    # ------------------------------------------------------------------ display
    def extra_repr(self) -> str:
        """Configuration shown inside ``repr`` (layers override it)."""
        return ""

    def __repr__(self) -> str:
        children = [f"({n}): {m!r}".replace("\n", "\n  ") for n, m in self.named_children()]
        extra = self.extra_repr()
        if not children:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}({extra}" if extra else f"{type(self).__name__}("
        return head + "\n  " + "\n  ".join(children) + "\n)"


def _fold_tied(
    state: Mapping[str, Tensor | np.ndarray], tied: Mapping[str, str]
) -> dict[str, Tensor | np.ndarray]:
    """``state`` with each tied alias entry folded into its first name's entry; ``RecordError``
    when the two entries hold different values (the record comes from an untied model)."""
    from ..record.errors import RecordError

    out = dict(state)
    differ = []
    for alias, first in tied.items():
        if alias not in out:
            continue
        v = out.pop(alias)
        if first not in out:
            out[first] = v
            continue
        a, b = (x.to_numpy() if isinstance(x, Tensor) else np.asarray(x) for x in (v, out[first]))
        if a.shape != b.shape or not np.array_equal(a, b):
            differ.append(f"{alias} and {first}")
    if differ:
        raise RecordError(
            f"load_state_dict: the record holds different tensors for {'; '.join(differ)}, "
            "which this model ties (one shared Param): it was saved from a model without the "
            "tie. Load it into the untied model it came from, or drop the later name's entry "
            "to keep the first one."
        )
    return out


def _check_device(op: str, device: Any) -> None:
    if not isinstance(device, Device):
        raise DTypeError(
            f"{op}: expected an em.Device, got {type(device).__name__}. Pass em.Device.cpu(), "
            "em.Device.torch('cpu') or em.Device.cuda() (.autodiff() to train)."
        )
