"""Distributed data parallel across processes (SEMANTICS §10), on ``torch.distributed``.

Every rank runs the same model on its own shard of the batch. ``DistributedDataParallel.backward``
runs the backward pass and averages each parameter's gradient across ranks while the pass is
still running: the ``on_leaf`` hook of ``ember.autodiff.backward`` reports each require-grad leaf
the moment its gradient is complete (every child has contributed), the gradient goes into its
bucket, and a bucket's all-reduce starts asynchronously once all its parameters reported (buckets
start in one fixed order on every rank, as collectives must match). Communication thus overlaps
the rest of backward; ``backward`` returns once every reduction has landed.

Gradient accumulation: inside ``with ddp.no_sync():`` a ``backward`` communicates nothing; it
adds this rank's gradients to a local sum held per parameter (as PyTorch's ``no_sync``) and
returns an empty ``GradientsParams``. The next ``backward`` outside ``no_sync`` adds the held sum
to each gradient as it completes, so one all-reduce per bucket averages the whole accumulation.

A failed or timed-out all-reduce (another rank died, raised or hangs) raises ``DistributedError``
after at most the group's ``timeout_s`` (see ``group.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from .._core.internal import from_raw, leaf_id
from .._core.tensor import Tensor
from ..autodiff import backward
from ..errors import AutodiffError, DeviceError, DTypeError
from ..nn.param import ParamId
from .group import ProcessGroup, _unflatten


@dataclass
class _Bucket:
    ids: list[ParamId]
    shapes: list[tuple[int, ...]]
    dtype: torch.dtype
    grads: list[torch.Tensor | None] = field(default_factory=list)
    remaining: int = 0
    flat: torch.Tensor | None = None
    work: Any = None


class DistributedDataParallel:
    """Averages gradients across the ranks of ``group`` during backward.

    Parameters are grouped into buckets of about ``bucket_mb`` megabytes (one dtype each) in
    reverse declaration order, roughly the order backward completes them. The plan is built on the
    first ``backward`` and rebuilt when the module's trainable parameters change; it must be the
    same on every rank (the same model everywhere).

    Every require-grad parameter and the loss must live on the torch backend (on
    ``group.device()``); anything else is rejected with ``DeviceError`` before any communication.
    A parameter that receives no gradient on a rank contributes zeros there, so every rank
    reduces the same buckets; a parameter reached by no rank ends with a zero gradient.
    The average equals the full-batch mean gradient when every rank's loss is a mean over
    equally many rows.

    Bucket size trades overlap against per-call cost: small buckets start reducing earlier in
    backward (more communication hidden) but pay a fixed latency per all-reduce; large ones
    (fewer calls) start late, and the last bucket's reduction is never hidden. PyTorch's default
    is 25 MB; measure with ``bench/ddp_scaling.py --bucket-mb``.

    Args:
        group: The ``ProcessGroup`` of this job.
        bucket_mb: Target bucket size in megabytes (> 0; a parameter larger than it gets a
            bucket of its own).

    Attributes:
        reductions: All-reduce calls started so far (one per bucket per synchronised
            ``backward``; none inside ``no_sync``).

    Example:
        >>> group = em.distributed.ProcessGroup.from_env()
        >>> ddp = em.distributed.DistributedDataParallel(group)
        >>> model = group.broadcast_module(Mlp(group.device().autodiff()))
        >>> grads = ddp.backward(F.cross_entropy(model(x), y), model)  # averaged over ranks
        >>> model = optim.step(1e-3, model, grads)
        >>> for i, (x, y) in enumerate(micro_batches):  # accumulation: reduce once, at the end
        ...     if i < len(micro_batches) - 1:
        ...         with ddp.no_sync():
        ...             ddp.backward(F.cross_entropy(model(x), y) / len(micro_batches), model)
        ...     else:
        ...         grads = ddp.backward(F.cross_entropy(model(x), y) / len(micro_batches), model)
    """

    def __init__(self, group: ProcessGroup, *, bucket_mb: float = 25.0) -> None:
        if not bucket_mb > 0:
            raise ValueError(
                f"DistributedDataParallel: expected bucket_mb > 0, got {bucket_mb}. It is the "
                "target size of one all-reduce in megabytes (PyTorch's default is 25)."
            )
        self.group = group
        self.bucket_mb = float(bucket_mb)
        self.bucket_bytes = max(1, int(bucket_mb * 2**20))
        self.reductions = 0
        self._key: tuple[Any, ...] | None = None
        self._plan: list[tuple[list[ParamId], list[tuple[int, ...]], torch.dtype]] = []
        self._syncing = True
        self._held: dict[ParamId, torch.Tensor] = {}

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside this block ``backward`` skips the all-reduce: it adds this rank's gradients to
        a sum held per parameter and returns an empty ``GradientsParams``; the next
        ``backward`` outside the block reduces the held sum with its own gradients.

        Use it for every micro-step of a gradient accumulation but the last: the result equals
        reducing every micro-step, with one all-reduce per bucket instead of one per micro-step.
        All ranks must enter it for the same micro-steps (collectives must match).
        """
        before = self._syncing
        self._syncing = False
        try:
            yield
        finally:
            self._syncing = before

    @property
    def holds_gradients(self) -> bool:
        """True while gradients of ``no_sync`` passes wait for the next synchronised one."""
        return bool(self._held)

    def _check(self, loss: Tensor, module: Any) -> list[tuple[ParamId, Tensor]]:
        """The require-grad parameters; ``DeviceError`` for a non-torch loss or parameter."""
        if not isinstance(loss, Tensor):
            raise DTypeError(
                "DistributedDataParallel.backward: expected an em.Tensor loss, got "
                f"{type(loss).__name__}."
            )
        dev = loss._hardware
        if dev.backend_name != "torch":
            raise DeviceError(
                f"DistributedDataParallel.backward: expected the loss on the torch backend, got "
                f"{dev}. Build the model on group.device().autodiff()."
            )
        if not loss.is_tracked():
            raise AutodiffError(
                "DistributedDataParallel.backward: expected a tracked loss, got an untracked "
                "tensor. Create the parameters on an autodiff device before the forward pass."
            )
        params: list[tuple[ParamId, Tensor]] = []
        for name, p in module.named_parameters():
            v = p.val()
            if not v.is_require_grad():
                continue  # frozen / plain parameters take no part
            if v._hardware.backend_name != "torch" or v._hardware != dev:
                raise DeviceError(
                    f"DistributedDataParallel.backward: expected every trainable parameter on "
                    f"the loss's device {dev}, got {name!r} on {v._hardware}. Build the model "
                    "on group.device().autodiff()."
                )
            self.group.check_tensor("DistributedDataParallel.backward", v._raw)
            params.append((p.id, v))
        return params

    def _buckets(self, params: list[tuple[ParamId, Tensor]]) -> list[_Bucket]:
        key = tuple((pid, v.shape, v._raw.dtype) for pid, v in params)
        if key != self._key:
            plan: list[tuple[list[ParamId], list[tuple[int, ...]], torch.dtype]] = []
            size = 0
            for pid, v in reversed(params):
                raw = v._raw
                dt = raw.dtype
                nbytes = raw.numel() * raw.element_size()
                if not plan or plan[-1][2] != dt or size + nbytes > self.bucket_bytes:
                    plan.append(([], [], dt))
                    size = 0
                plan[-1][0].append(pid)
                plan[-1][1].append(tuple(v.shape))
                size += nbytes
            self._key, self._plan = key, plan
        return [
            _Bucket(ids, shapes, dt, [None] * len(ids), len(ids)) for ids, shapes, dt in self._plan
        ]

    def backward(self, loss: Tensor, module: Any) -> Any:
        """Backward of ``loss`` with gradients averaged across ranks as they complete.

        Args:
            loss: This rank's scalar loss (torch backend), from ``module``'s parameters.
            module: The model whose trainable parameters are reduced.

        Returns:
            ``GradientsParams`` holding, per trainable parameter, the mean over ranks of the
            ranks' gradients (plus the sums held by earlier ``no_sync`` passes); ready for
            ``optim.step(lr, module, grads)``. Inside ``no_sync``: an empty one (the gradients
            are held for the next synchronised pass).

        Raises:
            DeviceError: The loss or a trainable parameter is not on the torch backend, or not
                on the device the group reduces (before any communication).
            DistributedError: An all-reduce failed or timed out (another rank died, raised or
                stopped answering), after at most the group's ``timeout_s``.
        """
        from ..optim.grads import GradientsParams

        params = self._check(loss, module)
        if not self._syncing:
            self._hold(loss, params)
            return GradientsParams()
        buckets = self._buckets(params)
        device = loss._raw.device
        held = self._held
        self._held = {}
        where: dict[int, tuple[int, int]] = {}  # leaf id -> (bucket, slot)
        by_id = {pid: v for pid, v in params}
        for bi, bucket in enumerate(buckets):
            for j, pid in enumerate(bucket.ids):
                lid = leaf_id(by_id[pid])
                assert lid is not None  # _check kept only require-grad leaves
                where[lid] = (bi, j)
        next_start = 0
        op = "DistributedDataParallel.backward"

        def start(b: _Bucket) -> None:
            parts = []
            for pid, g, s in zip(b.ids, b.grads, b.shapes):
                kept = held.pop(pid, None)  # a no_sync sum this pass did not reach
                if g is None:
                    g = kept if kept is not None else torch.zeros(s, dtype=b.dtype, device=device)
                parts.append(g.reshape(-1))
            b.flat = torch.cat(parts)
            b.grads = []  # the flat copy is what lands; drop the local pieces
            self.reductions += 1
            b.work = self.group.collective(op, partial(self.group.start_all_reduce, b.flat))

        def on_leaf(node_id: int, grad: Any) -> None:
            nonlocal next_start
            slot = where.get(node_id)
            if slot is None:
                return
            b = buckets[slot[0]]
            kept = held.pop(b.ids[slot[1]], None)
            b.grads[slot[1]] = grad if kept is None else kept + grad
            b.remaining -= 1
            while next_start < len(buckets) and buckets[next_start].remaining == 0:
                start(buckets[next_start])
                next_start += 1

        try:
            backward(loss, on_leaf=on_leaf)  # the local gradients are dropped: on_leaf has them
        finally:  # collectives must match across ranks: start the rest even after an error
            self.group.collective(op, lambda: self._finish(buckets, next_start, start))
        out = GradientsParams()
        dev = loss._hardware
        for b in buckets:
            assert b.flat is not None
            b.flat /= self.group.world_size
            for pid, g in zip(b.ids, _unflatten(b.flat, b.shapes)):
                out.register(pid, from_raw(g, dev))
        return out

    @staticmethod
    def _finish(buckets: list[_Bucket], next_start: int, start: Any) -> None:
        """Start the buckets backward did not start, then wait for every reduction."""
        for b in buckets[next_start:]:
            start(b)
        for b in buckets:
            b.work.wait()

    def _hold(self, loss: Tensor, params: list[tuple[ParamId, Tensor]]) -> None:
        """A ``no_sync`` pass: add this rank's gradients to the held per-parameter sums."""
        pid_of: dict[int, ParamId] = {}
        for pid, v in params:
            lid = leaf_id(v)
            assert lid is not None
            pid_of[lid] = pid
        held = self._held

        def on_leaf(node_id: int, grad: Any) -> None:
            pid = pid_of.get(node_id)
            if pid is None:
                return
            kept = held.get(pid)
            held[pid] = grad if kept is None else kept + grad  # out of place: grads may alias

        backward(loss, on_leaf=on_leaf)
