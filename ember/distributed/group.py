"""A process group on ``torch.distributed`` (SEMANTICS §10), set up from ``torchrun``'s variables.

``torchrun --nproc_per_node=N train.py`` starts N processes and gives each ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; ``ProcessGroup.from_env()``
joins them (NCCL when CUDA is available, else Gloo). Collectives work on raw ``torch.Tensor``
values of ember's torch backend and never change their inputs: results are new tensors.

Failure is bounded: every collective waits at most ``timeout_s`` (set when joining), and a
collective that fails (a peer's connection closed because it died or raised and exited) or times
out (a peer stopped answering) raises ``DistributedError`` naming the op, this rank and the
timeout, instead of a raw ``torch.distributed`` traceback or a hang. Under ``torchrun`` the agent
also stops the surviving ranks as soon as one exits with an error.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

from .._core.device import Device
from ..errors import DeviceError, DistributedError, EmberError

_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_FAILURES = (RuntimeError, TimeoutError, ConnectionError)  # DistBackendError is a RuntimeError


def _reduce_now(group: ProcessGroup, flat: torch.Tensor) -> None:
    group.start_all_reduce(flat).wait()


def _failed(op: str, group: ProcessGroup, e: BaseException, since: float) -> DistributedError:
    """The ``DistributedError`` of a collective ``op`` that raised ``e`` ``since`` seconds in."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[-1][:300]
    waited = time.monotonic() - since
    timed_out = "timed out" in text.lower() or "timeout" in text.lower()
    why = "timed out" if timed_out else "failed"
    return DistributedError(
        f"{op}: the collective {why} on rank {group.rank} of {group.world_size} after "
        f"{waited:.1f}s (timeout {group.timeout_s:g}s); torch.distributed said: {text}. Expected "
        "every rank to join it: another rank died, raised or stopped answering (see its log). "
        "This rank stops instead of hanging; restart the job, or pass a larger timeout_s to "
        "ProcessGroup.from_env if a rank is only slow."
    )


def _flatten(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def _unflatten(flat: torch.Tensor, shapes: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """Views of consecutive pieces of the 1-d ``flat``, one of each shape in turn."""
    out: list[torch.Tensor] = []
    start = 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(flat[start : start + n].view(tuple(shape)))
        start += n
    return out


class ProcessGroup:
    """The processes of one ``torchrun`` job: this process's rank and the world size.

    Attributes:
        rank: This process's index, 0 .. world_size - 1.
        world_size: Number of processes.
        local_rank: Index on this machine (selects the GPU under NCCL).
        backend: "nccl" or "gloo".
        timeout_s: How long a collective waits for the other ranks before raising
            ``DistributedError``.

    Example:
        >>> group = em.distributed.ProcessGroup.from_env()  # inside a torchrun process
        >>> device = group.device().autodiff()
        >>> summed = group.all_reduce([torch.ones(3)], average=False)
        >>> group.close()
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        local_rank: int,
        backend: str,
        *,
        timeout_s: float = 300.0,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.backend = backend
        self.timeout_s = timeout_s

    @staticmethod
    def from_env(backend: str | None = None, *, timeout_s: float = 300.0) -> ProcessGroup:
        """Join the job described by ``torchrun``'s environment variables.

        Args:
            backend: "nccl" or "gloo"; None picks NCCL when CUDA is available, else Gloo.
            timeout_s: How long collectives (and joining) wait for the other ranks (> 0); a
                rank that died or hangs makes the others raise ``DistributedError`` after at
                most this long.

        Raises:
            EmberError: A variable is missing (not started by ``torchrun``), the backend is
                unknown or not built into this PyTorch, or ``timeout_s`` is not positive.
            DistributedError: The other ranks did not join within ``timeout_s``.
        """
        if not timeout_s > 0:
            raise EmberError(
                f"ProcessGroup.from_env: expected timeout_s > 0, got {timeout_s}. It bounds how "
                "long a collective waits for the other ranks."
            )
        missing = [k for k in _ENV if k not in os.environ]
        if missing:
            raise EmberError(
                f"ProcessGroup.from_env: expected the torchrun variables {list(_ENV)}, missing "
                f"{missing}. Launch with: torchrun --nproc_per_node=2 train.py."
            )
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        ok = {"gloo": dist.is_gloo_available(), "nccl": dist.is_nccl_available()}
        if not ok.get(backend, False):
            raise EmberError(
                f"ProcessGroup.from_env: expected an available backend of {sorted(ok)}, got "
                f"{backend!r}. Gloo works on every CPU build; NCCL needs CUDA."
            )
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
        group = ProcessGroup(rank, world, local, backend, timeout_s=timeout_s)
        if backend == "nccl":
            torch.cuda.set_device(local)
        if not dist.is_initialized():
            group.collective(
                "ProcessGroup.from_env",
                lambda: dist.init_process_group(
                    backend,
                    init_method="env://",
                    rank=rank,
                    world_size=world,
                    timeout=timedelta(seconds=timeout_s),
                ),
            )
        return group

    def collective(self, op: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, with a failure or timeout of ``torch.distributed`` raised as
        ``DistributedError`` naming ``op`` (so no rank hangs or shows a raw traceback). The group
        is left (``close``) before the error is raised: a job with a dead rank cannot go on."""
        since = time.monotonic()
        try:
            return fn()
        except DistributedError:
            raise
        except _FAILURES as e:
            err = _failed(op, self, e, since)
            self._abandon()
            raise err from e

    def _abandon(self) -> None:
        """After a failed collective: leave the broken job now. Its transport threads would
        otherwise still be running at interpreter exit, and Gloo then aborts the process
        (SIGABRT) instead of letting it exit with its own status."""
        try:
            self.close()
        except _FAILURES:  # pragma: no cover - depends on how the peer died
            pass

    def device(self) -> Device:
        """This rank's device: ``Device.torch(f"cuda:{local_rank}")`` under NCCL, else torch CPU."""
        if self.backend == "nccl":
            return Device.torch(f"cuda:{self.local_rank}")
        return Device.torch("cpu")

    def check_tensor(self, op: str, t: torch.Tensor) -> None:
        """Raise ``DeviceError`` unless the backend can reduce ``t`` (NCCL: CUDA tensors)."""
        if self.backend == "nccl" and t.device.type != "cuda":
            raise DeviceError(
                f"{op}: NCCL reduces CUDA tensors, got one on {t.device}. Put the model on "
                "group.device()."
            )

    def start_all_reduce(self, flat: torch.Tensor) -> Any:
        """Start summing ``flat`` (a contiguous tensor, changed in place) across ranks.

        Returns:
            The ``torch.distributed`` work handle; ``handle.wait()`` blocks until it landed
            (wrap it in ``collective`` to turn a failure into ``DistributedError``).
        """
        return dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)

    def all_reduce(
        self, tensors: Sequence[torch.Tensor], *, average: bool = True
    ) -> list[torch.Tensor]:
        """Sum (or average) each tensor across ranks; one collective per dtype.

        Args:
            tensors: Raw torch tensors, the same shapes and dtypes on every rank.
            average: Divide the sums by ``world_size``.

        Returns:
            New tensors, in the order given; the inputs are unchanged.
        """
        for t in tensors:
            self.check_tensor("all_reduce", t)
        out: list[torch.Tensor | None] = [None] * len(tensors)
        by_dtype: dict[torch.dtype, list[int]] = {}
        for i, t in enumerate(tensors):
            by_dtype.setdefault(t.dtype, []).append(i)
        for idx in by_dtype.values():
            like = [tensors[i] for i in idx]
            flat = _flatten(like)
            self.collective("all_reduce", partial(_reduce_now, self, flat))
            if average:
                flat /= self.world_size
            for i, r in zip(idx, _unflatten(flat, [t.shape for t in like])):
                out[i] = r
        return [t for t in out if t is not None]

    def broadcast_module(self, module: Any, src: int = 0) -> Any:
        """Give every rank rank ``src``'s parameter and buffer values (in place, ids kept).

        Returns:
            ``module``, for chaining.
        """
        from .._core.internal import from_raw

        state = module.state_dict()
        names = sorted(state)
        for k in names:
            if state[k].device.backend_name != "torch":
                raise DeviceError(
                    f"broadcast_module: expected every value on the torch backend, got {k!r} on "
                    f"{state[k].device}. Build the model on group.device()."
                )
            self.check_tensor("broadcast_module", state[k]._raw)
        raw = [state[k]._raw.clone().contiguous() for k in names]
        for t in raw:
            self.collective("broadcast_module", partial(dist.broadcast, t, src=src))
        module.load_state_dict({k: from_raw(t, state[k]._hardware) for k, t in zip(names, raw)})
        return module

    def max_divergence(self, module: Any) -> float:
        """The largest absolute difference between any rank's parameter or buffer values and
        rank 0's (0.0 when every rank holds the same weights, as data parallelism promises).

        Every rank must call it (one broadcast per value, one max all-reduce); floats only.
        """
        state = module.state_dict()
        worst = torch.zeros(1, dtype=torch.float64, device=self._reduce_device())
        for k in sorted(state):
            mine = state[k]._raw
            if not mine.is_floating_point():
                continue
            self.check_tensor("max_divergence", mine)
            theirs = mine.detach().clone().contiguous()
            self.collective("max_divergence", partial(dist.broadcast, theirs, src=0))
            diff = (mine.detach().double() - theirs.double()).abs().max().reshape(1)
            worst = torch.maximum(worst, diff.to(worst.device))
        self.collective("max_divergence", lambda: dist.all_reduce(worst, op=dist.ReduceOp.MAX))
        return float(worst.item())

    def _reduce_device(self) -> torch.device:
        """Where small collectives' tensors live: this rank's GPU under NCCL, else the CPU."""
        if self.backend == "nccl":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")

    def barrier(self) -> None:
        """Wait until every rank got here (at most ``timeout_s``; on Gloo a monitored barrier,
        whose ``DistributedError`` names the ranks that did not arrive)."""
        if self.backend == "gloo":
            timeout = timedelta(seconds=self.timeout_s)
            self.collective(
                "barrier", lambda: dist.monitored_barrier(timeout=timeout, wait_all_ranks=True)
            )
        else:
            self.collective("barrier", dist.barrier)

    def close(self) -> None:
        """Leave the job (``destroy_process_group``)."""
        if dist.is_initialized():
            dist.destroy_process_group()
