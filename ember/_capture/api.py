"""``em.capture``: a training step recorded once per signature and replayed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._core.device import Device
from .._core.tensor import Tensor
from ..errors import CaptureError, DTypeError, ShapeError
from ..nn.module import Module
from .cache import RecordingCache
from .eager import run_eager, warn_eager
from .graph import CudaGraph, Graph, GraphRecording
from .signature import Leaves, module_key, optimizer_key, state_of_closure, walk

# what the cache holds for a signature: "warm" (seen once, eagerly), "fallback" (a host read
# under fallback=True: plain eager calls from now on) or a GraphRecording. CPU backends keep no
# cache: every call is the eager call under the guard.
_WARM = "warm"
_FALLBACK = "fallback"


class Captured:
    """The callable ``em.capture(fn)`` returns: ``fn``'s results and effects, replayed.

    Attributes:
        recordings: How many signatures the cache holds now (at most ``max_recordings``; 0 on
            CPU backends, which record nothing).
        recorded: How many CUDA graphs were recorded so far.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        fallback: bool,
        max_recordings: int,
        graph: Callable[[], Graph] = CudaGraph,
        record_cpu: bool = False,
    ) -> None:
        self.fn = fn
        self.fallback = fallback
        self.name = getattr(fn, "__qualname__", None) or type(fn).__name__
        self._cache: RecordingCache[Any] = RecordingCache(max_recordings)
        self._closure_modules, self._closure_optims = state_of_closure(fn)
        if isinstance(fn, Module):  # a module captured as a function: its parameters are state
            self._closure_modules.append(fn)
        # the seam that runs the CUDA structure without a GPU: tests pass a ``Graph`` that
        # re-runs the recorded function on a torch-CPU device (tests/unit/capture)
        self._graph = graph
        self._record_cpu = record_cpu
        self._warned = False
        self.recorded = 0
        functools.update_wrapper(self, fn)

    @property
    def recordings(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"em.capture({self.name}, recordings={self.recordings})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._record_cpu:
            first = _first_device(args, kwargs, self._closure_modules)
            if first is None or not first.is_cuda:
                # a CPU backend: the eager call under the guard, with no signature to compute
                out, reads = run_eager(self.fn, args, kwargs, self.name, note=self.fallback)
                if reads and not self._warned:
                    self._warned = True
                    warn_eager(self.name, reads)
                return out
        key, spec, leaves = walk(args, kwargs)
        modules = [*leaves.modules, *self._closure_modules]
        optimizers = [*leaves.optimizers, *self._closure_optims]
        if self._closure_modules or self._closure_optims:
            key = (
                key,
                tuple(module_key(m) for m in self._closure_modules),
                tuple(optimizer_key(o) for o in self._closure_optims),
            )
        device = _device(self.name, leaves, modules)
        entry = self._cache.get(key)
        if isinstance(entry, GraphRecording):
            return entry(leaves)
        if entry is _FALLBACK:
            return self.fn(*args, **kwargs)
        if entry is None or device is None:
            # a new signature: the warm-up, an eager call under the guard (on a side stream)
            out, reads = run_eager(
                self.fn, args, kwargs, self.name, note=self.fallback, device=device
            )
            if reads:
                self._eager_from_now(key, reads)
            elif device is not None:
                self._cache.put(key, _WARM)
            return out
        # seen once on CUDA: record, then replay for this call
        assert device is not None
        recording = GraphRecording(
            self.fn, self.name, spec, leaves, modules, optimizers, device, self._graph()
        )
        self._cache.put(key, recording)
        self.recorded += 1
        return recording(leaves)

    def _eager_from_now(self, key: Any, reads: list[str]) -> None:
        self._cache.put(key, _FALLBACK)
        if not self._warned:
            self._warned = True
            warn_eager(self.name, reads)


def _first_device(
    args: tuple[Any, ...], kwargs: dict[str, Any], closure: list[Module]
) -> Device | None:
    """The device of the first tensor or parameter among the arguments (a cheap look: it only
    decides between the eager CPU path and a recording)."""
    for a in (*args, *kwargs.values(), *closure):
        if isinstance(a, Tensor):
            return a._hardware
        if isinstance(a, Module):
            p = next(a.parameters(), None)
            if p is not None:
                return p.val()._hardware
        elif type(a) is tuple or type(a) is list:
            for b in a:
                if isinstance(b, Tensor):
                    return b._hardware
    return None


def _device(name: str, leaves: Leaves, modules: list[Module]) -> Device | None:
    """The one device of the call's tensors and parameters (``None``: no tensor at all)."""
    seen: dict[str, Device] = {}
    for i in leaves.tensors:
        d = leaves.values[i]._hardware
        seen.setdefault(str(d), d)
    for m in modules:
        for p in m.parameters():
            d = p.val()._hardware
            seen.setdefault(str(d), d)
    if len(seen) > 1 and any(d.is_cuda for d in seen.values()):
        raise CaptureError(
            f"capture: {name} takes tensors on several devices ({', '.join(sorted(seen))}); a "
            "CUDA graph records one device. Move everything to one device, or capture one "
            "function per device."
        )
    return next(iter(seen.values()), None)


def capture(fn: Callable[..., Any], *, fallback: bool = False, max_recordings: int = 8) -> Captured:
    """Record ``fn`` once per signature and replay it: a whole training step as one CUDA graph.

    ``fn`` is a function of tensors, modules, optimizers and Python numbers, typically forward,
    loss, ``backward()``, ``GradientsParams``, clipping and ``optim.step``. The returned callable
    has ``fn``'s results and effects (SEMANTICS §12): after a call the modules hold the updated
    parameters (same ``ParamId``s), the optimizers their updated state, and the returned tensors
    the step's values.

    - Tensors and Python numbers passed in are inputs: a new learning rate every step is read on
      the device, never baked in. Modules and optimizers (arguments, or closure variables of
      ``fn``) are state that a replay reads and updates. Other arguments are constants.
    - A signature (shapes, dtypes, devices, strategies of the tensors; each module's structure
      and training flags; each optimizer's state layout; the number types; the autocast policy)
      seen for the first time runs eagerly (the warm-up); on a CUDA device the next call with
      it records a ``torch.cuda.CUDAGraph`` (private memory pool) and later calls replay it.
      At most ``max_recordings`` recordings are kept, the oldest dropped.
    - On the NumPy and torch-CPU backends every call is the eager call (under the guard): the
      same results, at the cost of eager code plus one walk over the arguments.
    - Reading a device value on the host inside ``fn`` (``item()``, ``to_numpy()``,
      ``tolist()``, ``float(t)``, ``bool(t)``, a data-dependent shape such as ``x[mask]``)
      raises ``em.CaptureError`` naming the op, on every backend, so code that runs on CPU
      also records on CUDA; with ``fallback=True`` the call runs eagerly instead, with one
      warning, and so do later calls with that signature.

    On CUDA a replay updates the module's and optimizer's tensors in place: a tensor read from
    the module before a call (``model.fc.weight.val()``) shows the new values after it; clone it
    to keep the old ones. Returned tensors are copies (the next replay leaves them alone).

    Args:
        fn: The function to capture.
        fallback: Run eagerly with one warning instead of raising ``CaptureError`` on a host
            read.
        max_recordings: How many signatures' recordings to keep (at least 1).

    Example:
        >>> def train_step(model, optim, x, y, lr):
        ...     loss = F.cross_entropy(model(x), y)
        ...     grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
        ...     optim.step(lr, model, grads)
        ...     return loss
        >>> step = em.capture(train_step)
        >>> for x, y in batches:
        ...     loss = step(model, optim, x, y, schedule.lr())
        >>> loss.item()  # read after the call, never inside it
    """
    if not callable(fn):
        raise DTypeError(f"capture: expected a callable, got {type(fn).__name__}.")
    if isinstance(fn, Captured):
        raise DTypeError(f"capture: {fn.name} is already captured; capture the function once.")
    if isinstance(max_recordings, bool) or not isinstance(max_recordings, int):
        raise DTypeError(
            f"capture: expected an int for max_recordings, got {type(max_recordings).__name__}."
        )
    if max_recordings < 1:
        raise ShapeError(
            f"capture: expected max_recordings >= 1, got {max_recordings}. Keep at least one."
        )
    return Captured(fn, fallback=bool(fallback), max_recordings=max_recordings)
