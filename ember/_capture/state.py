"""The state a CUDA recording reads and updates: module parameters and buffers, optimizer state.

A recording owns one static buffer per state tensor. The replayed kernels read the buffers and
the recording ends with copies of the step's new values into them, so after a replay the module
and the optimizer hold the updated values in the same storages, under the same ``ParamId``s: no
second copy of parameters or optimizer state is kept. Integer counts of the optimizer state
(Adam's step) become 0-d int64 device tensors, so the recorded kernels count on the device.
Torch backend only (the arrays are ``torch.Tensor``s).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core.device import Device
from .._core.internal import from_raw
from .._core.tensor import Tensor
from ..dtype import int64
from ..nn.module import Module
from ..optim.base import Optimizer


class _Slot:
    """One state tensor: how to read it from its owner and put a value back."""

    __slots__ = ("get", "put", "static")

    def __init__(self, get: Callable[[], Any], put: Callable[[Tensor], None], static: Any) -> None:
        self.get = get
        self.put = put
        self.static = static  # the backend array the recording reads and writes


def _adopt(t: Tensor, shared: bool) -> Any:
    """The array to use as a static buffer: ``t``'s own when dense and not handed out."""
    raw = t._raw
    if shared or not raw.is_contiguous():
        return raw.clone(memory_format=_contiguous())
    return raw


def _contiguous() -> Any:
    import torch

    return torch.contiguous_format


class StateSlots:
    """The static buffers of every module and optimizer one recording touches."""

    def __init__(self, modules: list[Module], optimizers: list[Optimizer], device: Device) -> None:
        self.device = device
        self.slots: list[_Slot] = []
        seen: set[int] = set()
        for m in modules:
            self._module(m, seen)
        for o in {id(o): o for o in optimizers}.values():
            self._optimizer(o)

    def _module(self, m: Module, seen: set[int]) -> None:
        for _, p in m.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            self._add(p.val, p._replace, p.val(), shared=False)
        for sub in m.modules():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            for b in _own_buffers(sub):
                self._add(_getter(sub, b), _setter(sub, b), getattr(sub, b), shared=False)

    def _optimizer(self, o: Optimizer) -> None:
        dev = self.device
        # integer counts (Adam's step) are kept on the device from now on; a count equal for
        # every parameter becomes one tensor, so a multi-tensor kernel can take it once
        counts: dict[tuple[str, int], Tensor] = {}
        for state in o._state.values():
            for key, v in state.items():
                if not isinstance(v, Tensor):
                    counts.setdefault(
                        (key, int(v)), Tensor.full((), int(v), dtype=int64, device=dev)
                    )
        for pid, state in o._state.items():
            shared = pid in o._shared
            for key, v in list(state.items()):
                if not isinstance(v, Tensor):
                    v = counts[(key, int(v))]
                    state[key] = v
                self._add(_state_getter(o, pid, key), _state_setter(o, pid, key), v, shared=shared)
            o._shared.discard(pid)

    def _add(
        self, get: Callable[[], Any], put: Callable[[Tensor], None], t: Tensor, *, shared: bool
    ) -> None:
        static = _adopt(t, shared)
        if static is not t._raw:
            put(from_raw(static, t._hardware))
        self.slots.append(_Slot(get, put, static))

    def sync_in(self) -> None:
        """Before a replay: a state tensor replaced since the last call (``model.load``,
        ``load_state_dict``) is copied into its static buffer and the buffer bound again."""
        dev = self.device
        wrapped: dict[int, Tensor] = {}
        for s in self.slots:
            t = s.get()
            if not isinstance(t, Tensor):  # a count load_state_dict put back as an int
                s.static.fill_(int(t))
                w = wrapped.get(id(s.static))
                if w is None:
                    w = wrapped[id(s.static)] = from_raw(s.static, dev)
                s.put(w)
            elif t._raw is not s.static:
                s.static.copy_(t._raw)
                s.put(from_raw(s.static, t._hardware))

    def write_back(self) -> None:
        """At the end of the recorded function: the new state values into the static buffers
        (recorded as copies; a value already in its buffer, as donated moments, is skipped)."""
        import torch

        done: set[int] = set()  # a shared count is copied once
        dst, src = [], []
        for s in self.slots:
            raw = s.get()._raw
            if id(s.static) in done:
                continue
            done.add(id(s.static))
            if raw is not s.static and raw.data_ptr() != s.static.data_ptr():
                dst.append(s.static)
                src.append(raw)
        if dst:
            torch._foreach_copy_(dst, src)  # one multi-tensor launch for all parameters

    def bind(self) -> None:
        """After recording: module and optimizer hold their static buffers again."""
        wrapped: dict[int, Tensor] = {}  # a shared count stays one tensor object
        for s in self.slots:
            t = s.get()
            if t._raw is not s.static:
                w = wrapped.get(id(s.static))
                if w is None:
                    w = wrapped[id(s.static)] = from_raw(s.static, t._hardware)
                s.put(w)


def _own_buffers(m: Module) -> list[str]:
    d = m.__dict__
    return [n for n in d["_buffer_names"] if d[n] is not None]


def _getter(m: Module, name: str) -> Callable[[], Any]:
    return lambda: getattr(m, name)


def _setter(m: Module, name: str) -> Callable[[Tensor], None]:
    return lambda t: setattr(m, name, t)


# an optimizer step replaces each parameter's state dict: read and write through the optimizer
def _state_getter(o: Optimizer, pid: Any, key: str) -> Callable[[], Any]:
    return lambda: o._state[pid][key]


def _state_setter(o: Optimizer, pid: Any, key: str) -> Callable[[Tensor], None]:
    def put(t: Tensor) -> None:
        o._state[pid][key] = t

    return put
