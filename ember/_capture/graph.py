"""A recording on a CUDA device: one ``torch.cuda.CUDAGraph`` of the whole call, replayed.

Recording (the second call of a signature; the first ran eagerly, as warm-up):

1. ``StateSlots`` gives every parameter, buffer and optimizer-state tensor a static buffer
   (the tensor's own storage when it is dense and nobody else was handed it);
2. tensor arguments get static buffers (copied into on every call); Python numbers become 0-d
   device tensors (float32, or float64 for float64 models; int64 for ints) filled on every call,
   so a learning rate that changes every step is read by the kernels, never baked in;
3. the function runs once under ``torch.cuda.graph`` (its kernels are recorded, in a private
   memory pool) and ends with copies of the new state values into the static buffers; the
   backend's random generator is registered with the graph, so dropout draws fresh masks on
   every replay, from the seeded stream;
4. module and optimizer are bound to the static buffers again, and the graph is replayed for
   this call's effects.

A replay copies the call's inputs in, copies in any state tensor replaced since the last call
(``model.load``), replays, and returns copies of the outputs (values that the next replay does
not overwrite). The kernels run on the torch backend; ``Graph`` is the seam that runs them.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from .._core.device import Device
from .._core.internal import from_raw, param_leaf
from .._core.tensor import Tensor
from ..dtype import float32, float64, int64
from ..errors import CaptureError
from ..nn.module import Module
from ..optim.base import Optimizer
from .eager import capture_stream
from .guard import guarded
from .signature import Leaves, Spec, rebuild
from .state import StateSlots


class Graph(Protocol):
    """What a recording needs of a graph: record a thunk once, replay it.

    ``record`` runs ``thunk`` once to record its kernels and returns its result; it must leave
    the arrays in ``unchanged`` (static inputs and state) and the device's random stream as
    they were: a CUDA capture runs no kernel, so it does. ``replay`` runs the kernels again.
    """

    def record(self, thunk: Any, device: Device, unchanged: list[Any]) -> Any: ...

    def replay(self) -> None: ...


class CudaGraph:
    """``torch.cuda.CUDAGraph`` in a private memory pool, the backend generator registered."""

    def __init__(self) -> None:
        import torch

        self._graph = torch.cuda.CUDAGraph()

    def record(self, thunk: Any, device: Device, unchanged: list[Any]) -> Any:
        import torch

        g = self._graph
        register = getattr(g, "register_generator_state", None)  # torch >= 2.5
        rng = cast(Any, device.b).rng  # the torch backend's generator (dropout draws from it)
        if register is not None and rng is not torch.cuda.default_generators[rng.device.index]:
            register(rng)
        side = capture_stream(rng.device)  # the warm-up's stream: its cuBLAS workspace is reused
        side.wait_stream(torch.cuda.current_stream(rng.device))
        with torch.cuda.graph(g, stream=side):
            out = thunk()
        torch.cuda.current_stream(rng.device).wait_stream(side)
        return out

    def replay(self) -> None:
        self._graph.replay()


class GraphRecording:
    """One signature's graph: static inputs, static state, the graph, its outputs."""

    def __init__(
        self,
        fn: Any,
        name: str,
        spec: Spec,
        leaves: Leaves,
        modules: list[Module],
        optimizers: list[Optimizer],
        device: Device,
        graph: Graph,
    ) -> None:
        self.device = device
        self._spec = spec
        self._tensor_pos = list(leaves.tensors)
        self._number_pos = list(leaves.numbers)
        self._graph = graph
        self.slots = StateSlots(modules, optimizers, device)
        values = list(leaves.values)
        self._static_in: list[Any] = []
        for i in self._tensor_pos:
            t = values[i]
            if t.is_tracked() and not t.is_require_grad():
                raise CaptureError(
                    f"capture: argument {i} of {name} is a tracked tensor (part of a graph built "
                    "before the call); a recording cannot reach that graph. Pass it detached, or "
                    "compute it inside the captured function."
                )
            buf = t._raw.clone()
            self._static_in.append(buf)
            plain = from_raw(buf, t._hardware)
            values[i] = (
                param_leaf(plain, t._ckpt_strategy, True)
                if t.is_require_grad()
                else from_raw(buf, t._hardware, t._ckpt_strategy)
            )
        wide = float64 if _any_float64(modules, values, self._tensor_pos) else float32
        self._numbers: list[Tensor] = []
        for i in self._number_pos:
            v = values[i]
            dt = int64 if type(v) is int else wide
            n = Tensor.full((), v, dtype=dt, device=device)
            self._numbers.append(n)
            values[i] = n
        args, kwargs = rebuild(spec, values)

        def thunk() -> Any:
            with guarded(name):
                out = fn(*args, **kwargs)
            self.slots.write_back()
            return out

        unchanged = [*self._static_in, *(n._raw for n in self._numbers)]
        out = graph.record(thunk, device, [*unchanged, *(s.static for s in self.slots.slots)])
        self.slots.bind()
        self._out_spec, self._out_raw = _outputs(out, name)

    def __call__(self, leaves: Leaves) -> Any:
        values = leaves.values
        for buf, i in zip(self._static_in, self._tensor_pos):
            raw = values[i]._raw
            if raw is not buf:
                buf.copy_(raw, non_blocking=True)
        for n, i in zip(self._numbers, self._number_pos):
            n._raw.fill_(values[i])
        self.slots.sync_in()
        self._graph.replay()
        self.slots.bind()  # a no-op after a CUDA replay (no Python ran); keeps the seam honest
        dev = self.device
        outs = [from_raw(r.clone(), dev) if r is not None else None for r in self._out_raw]
        return _rebuild_outputs(self._out_spec, outs)


def _any_float64(modules: list[Module], values: list[Any], tensor_pos: list[int]) -> bool:
    if any(values[i].dtype is float64 for i in tensor_pos):
        return True
    return any(p.dtype is float64 for m in modules for p in m.parameters())


def _outputs(out: Any, name: str) -> tuple[Any, list[Any]]:
    """How to rebuild ``fn``'s result, and the raw arrays of its tensors (``None``: constant)."""
    from .signature import walk

    _, spec, leaves = walk((out,), {})
    raws: list[Any] = []
    consts: list[Any] = []
    for v in leaves.values:
        if isinstance(v, Tensor):
            raws.append(v._raw)
            consts.append(None)
        elif isinstance(v, (Module, Optimizer, int, float, bool, str)) or v is None:
            # constants of the recording: a number fn computes without a host read depends on
            # no input value (input numbers are tensors inside fn)
            raws.append(None)
            consts.append(v)
        else:
            raise CaptureError(
                f"capture: {name} returned a {type(v).__name__}; a captured function returns "
                "tensors (in tuples, lists, dicts or GradientsParams), modules, optimizers, "
                "numbers, strings or None."
            )
    return (spec, consts), raws


def _rebuild_outputs(out_spec: Any, outs: list[Any]) -> Any:
    spec, consts = out_spec
    values = [c if o is None else o for o, c in zip(outs, consts)]
    (result,), _ = rebuild(spec, values)
    return result
