"""Data parallelism in one process: one forked replica per device, one worker thread each.

SEMANTICS §10: each worker runs a replica (``module.fork(device)``, an independent graph) on its
shard of the batch and returns ``GradientsParams``; they are moved to the main device and summed,
weighted so that the sum equals the gradient of the full-batch mean loss. The caller steps the
main model with that sum; the next call re-forks the replicas from the updated main parameters
(parameters are values, so a fork is a copy of the arrays, nothing more). Independent graphs
share no lock: each replica records and differentiates its own nodes in its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._core.device import Device
from .._core.tensor import Tensor
from ..errors import DeviceError, EmberError

LossStep = Callable[[Any, Sequence[Tensor]], tuple[Tensor, Tensor | None, Tensor | None]]


class StepPrecision(Protocol):
    """Mixed precision of a step (``em.train``'s ``Precision``): the forward's autocast, entered
    by the thread that runs the forward, and the loss scaling (fp16) before backward."""

    def autocast(self) -> AbstractContextManager[Any]: ...

    def scale(self, loss: Tensor) -> Tensor: ...


def forward_backward_loss(
    loss_fn: LossStep,
    model: Any,
    batch: Sequence[Tensor],
    factor: float,
    precision: StepPrecision | None,
) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor]:
    """``loss_fn(model, batch)`` under ``precision``'s autocast in the calling thread.

    Returns:
        The mean loss, logits, targets, and the loss to run backward from: ``factor`` times
        the loss, scaled by ``precision`` (fp16's loss scale).
    """
    with precision.autocast() if precision is not None else nullcontext():
        loss, logits, targets = loss_fn(model, batch)
    scaled = loss if factor == 1.0 else loss * factor
    if precision is not None:
        scaled = precision.scale(scaled)
    return loss, logits, targets, scaled


@dataclass
class ParallelStep:
    """What ``DataParallel.backward`` returns for one batch.

    Attributes:
        grads: ``GradientsParams`` on the main device: ``scale`` times the gradient of the
            full-batch mean loss.
        loss: The full-batch mean loss (unscaled), ``sum_k n_k / N * loss_k``.
        n: Rows in the batch (N, the size of dim 0).
        logits: The replicas' logits concatenated in shard order as NumPy (N', K), or None.
        targets: The matching targets (N',), or None.
    """

    grads: Any
    loss: float
    n: int
    logits: np.ndarray | None
    targets: np.ndarray | None


def split_batch(batch: Sequence[Tensor], parts: int) -> list[list[Tensor]]:
    """Split every tensor of ``batch`` along dim 0 into at most ``parts`` near-equal shards.

    Shard ``k`` has ``N // parts`` rows plus one for the first ``N % parts`` shards; empty
    shards are dropped, so fewer than ``parts`` come back when N < parts.

    Args:
        batch: Tensors with the same size N of dim 0 (inputs, targets, ...).
        parts: Number of shards wanted (>= 1).

    Returns:
        A list of shards, each a list with one (n_k, ...) piece of every batch tensor.

    Raises:
        EmberError: ``batch`` is empty, or its tensors differ in dim 0.
    """
    if not batch:
        raise EmberError("split_batch: expected at least one tensor in the batch, got none.")
    n = int(batch[0].shape[0])
    for t in batch:
        if t.ndim == 0 or int(t.shape[0]) != n:
            raise EmberError(
                f"split_batch: expected every batch tensor to have {n} rows in dim 0, got shape "
                f"{tuple(t.shape)}. Data parallelism splits the batch along dim 0."
            )
    base, extra = divmod(n, parts)
    sizes = [base + (1 if k < extra else 0) for k in range(parts)]
    shards: list[list[Tensor]] = []
    start = 0
    for size in sizes:
        if size == 0:
            continue
        shards.append([t.narrow(0, start, size) for t in batch])
        start += size
    return shards


class DataParallel:
    """Runs one replica per device in its own worker thread and combines their gradients.

    The first device is the main device: the main model lives there (``place``), the combined
    gradients land there, and the optimizer state stays there. A device may appear more than once
    (two replicas on the same hardware, e.g. two NumPy workers).

    Assumes ``loss_fn`` returns the mean loss over the rows of its batch; weighting shard ``k``
    by ``n_k / N`` then makes the summed gradient equal the full-batch mean gradient. Buffers
    (batch-norm running statistics) follow the replica that runs the main model itself (the first
    shard, when the main model is on the main device); the other replicas' buffer updates are
    dropped.

    Args:
        devices: The devices to run replicas on (plain or autodiff; only the hardware is used).

    Raises:
        DeviceError: ``devices`` is empty or holds something other than ``em.Device``.

    Example:
        >>> dp = DataParallel([em.Device.cpu(), em.Device.torch("cpu")])
        >>> model = dp.place(model)
        >>> step = dp.backward(model, (x, y), classification_step)
        >>> model = optim.step(1e-3, model, step.grads)
        >>> dp.close()
    """

    def __init__(self, devices: Sequence[Device]) -> None:
        devs = list(devices)
        if not devs or not all(isinstance(d, Device) for d in devs):
            raise DeviceError(
                f"DataParallel: expected a non-empty list of em.Device, got {devices!r}. "
                "Example: devices=[em.Device.cpu(), em.Device.torch('cpu')]."
            )
        self.devices: list[Device] = [d.without_autodiff() for d in devs]
        self._pool: ThreadPoolExecutor | None = None

    @property
    def main_device(self) -> Device:
        """The (plain) device holding the main model and the combined gradients."""
        return self.devices[0]

    def place(self, model: Any) -> Any:
        """``model`` itself when all its parameters are on the main device, else its fork there.

        The fork keeps each parameter's autodiff context (trainability and strategy) and id.
        """
        if all(d == self.main_device for d in model.devices()):
            return model
        return model.fork(self.main_device)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=len(self.devices), thread_name_prefix="ember-replica"
            )
        return self._pool

    def backward(
        self,
        model: Any,
        batch: Sequence[Tensor],
        loss_fn: LossStep,
        *,
        scale: float = 1.0,
        outputs: bool = False,
        sync: bool = True,
        precision: StepPrecision | None = None,
    ) -> ParallelStep:
        """Forward and backward of ``batch`` split over the replicas; gradients combined.

        Args:
            model: The main model (on the main device, parameters as autodiff leaves).
            batch: Tensors whose dim 0 is the batch (N, ...); split with ``split_batch``.
            loss_fn: ``loss_fn(replica, shard) -> (mean loss, logits, targets)``.
            scale: Factor on the combined gradient (``1 / n`` for gradient accumulation).
            outputs: Also return the logits and targets as NumPy (for metrics).
            sync: Accepted for the ``Learner`` loop's sake (``DistributedSteps`` skips the
                all-reduce when False); in one process there is no communication to skip.
            precision: Mixed precision (``em.train``'s ``Precision``): each worker thread runs
                its forward under ``precision.autocast()`` (autocast is per thread) and scales
                its loss with ``precision.scale`` (fp16); the combined gradients are then
                scaled too, for the caller's ``GradScaler`` to unscale. None: full precision.

        Returns:
            A ``ParallelStep``; its ``grads`` are ready for ``optim.step(lr, model, grads)``.
        """
        from ..optim.grads import GradientsAccumulator, GradientsParams

        n = int(batch[0].shape[0]) if batch else 0
        shards = split_batch(batch, len(self.devices))
        main_on_main = all(d == self.main_device for d in model.devices())

        def work(k: int, shard: list[Tensor]) -> tuple[Any, float, Any, Any]:
            dev = self.devices[k]
            own = k == 0 and main_on_main  # the main model runs the first shard itself
            replica = model if own else model.fork(dev)
            local = [t.to_device(dev) for t in shard]
            weight = int(shard[0].shape[0]) / n
            loss, logits, targets, scaled = forward_backward_loss(
                loss_fn, replica, local, weight * scale, precision
            )
            grads = GradientsParams.from_grads(scaled.backward(), replica)
            if dev != self.main_device:
                grads = grads.to_device(self.main_device, replica)
            value = float(loss.item()) * weight
            lg = logits.without_autodiff().to_numpy() if outputs and logits is not None else None
            tg = targets.without_autodiff().to_numpy() if outputs and targets is not None else None
            return grads, value, lg, tg

        if len(shards) == 1:
            results = [work(0, shards[0])]
        else:
            pool = self._workers()
            futures = [pool.submit(work, k, s) for k, s in enumerate(shards)]
            results = [f.result() for f in futures]
        acc = GradientsAccumulator()
        for grads, *_ in results:
            acc.accumulate(model, grads)
        logits = [r[2] for r in results if r[2] is not None]
        targets = [r[3] for r in results if r[3] is not None]
        return ParallelStep(
            grads=acc.grads(),
            loss=sum(r[1] for r in results),
            n=n,
            logits=np.concatenate(logits) if len(logits) == len(results) else None,
            targets=np.concatenate(targets) if len(targets) == len(results) else None,
        )

    def close(self) -> None:
        """Stop the worker threads (a later ``backward`` starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
