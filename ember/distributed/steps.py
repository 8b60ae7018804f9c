"""What ``em.train.Learner(devices=...)`` trains through: in-process replicas or DDP ranks.

``parallel_for(devices)`` turns ``Learner``'s ``devices`` argument into the object its loop
calls: a list of devices gives ``DataParallel`` (replicas in threads); a ``ProcessGroup`` (or a
``DistributedDataParallel``) gives ``DistributedSteps``, which runs this rank's batch and
averages the gradients across the ranks of a ``torchrun`` job. Both offer ``place``,
``backward(..., sync=)``, ``main_device`` and ``close``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core.device import Device
from .._core.tensor import Tensor
from ..errors import DeviceError, EmberError
from .replicas import (
    DataParallel,
    LossStep,
    ParallelStep,
    StepPrecision,
    forward_backward_loss,
    split_batch,
)

if TYPE_CHECKING:  # ddp.py imports torch; a list of NumPy devices never needs it
    from .ddp import DistributedDataParallel


class DistributedSteps:
    """One rank's training steps for ``Learner``.

    ``place`` moves the model to the rank's device and gives it rank 0's values; ``backward``
    returns the gradients averaged over the ranks. With ``sync=False`` (every micro-step of a
    gradient accumulation but the last) it communicates nothing (``ddp.no_sync()``) and returns
    empty gradients; the synchronised micro-step returns the average of the whole accumulation.

    By default each rank's loader gives this rank's own batch. With ``shard=True`` every rank's
    loader gives the same full batch (the same loader, seeded alike) and ``backward`` keeps this
    rank's rows of it (``split_batch``: a disjoint slice per rank, near-equal sizes): each
    rank's loss is weighted by its share of the rows, so the averaged gradient is the
    full-batch mean gradient even when N is not a multiple of the world size, and the loss
    returned is the full batch's (one scalar all-reduce), the same number on every rank, so
    every rank takes the same decisions (non-finite loss, early stopping).

    Args:
        ddp: The ``DistributedDataParallel`` of this job (its group and bucket size).
        shard: Loaders give the full batch; keep this rank's rows.
    """

    def __init__(self, ddp: DistributedDataParallel, *, shard: bool = False) -> None:
        self.ddp = ddp
        self.group = ddp.group
        self.shard = shard

    @property
    def main_device(self) -> Device:
        """This rank's (plain) device: where the model and its gradients live."""
        return self.group.device()

    def place(self, model: Any) -> Any:
        """``model`` on this rank's device (a fork when it lives elsewhere), every value
        overwritten by rank 0's so that all ranks start from the same weights."""
        if not all(d == self.main_device for d in model.devices()):
            model = model.fork(self.main_device)
        return self.group.broadcast_module(model)

    def _rows(self, batch: Sequence[Tensor]) -> tuple[list[Tensor], float]:
        """This rank's rows of ``batch`` and its weight ``n_rank * world / N`` (1 unsharded)."""
        if not self.shard:
            return list(batch), 1.0
        world, rank = self.group.world_size, self.group.rank
        n = int(batch[0].shape[0]) if batch else 0
        if n < world:
            raise EmberError(
                f"DistributedSteps.backward: expected a batch of at least {world} rows to split "
                f"over {world} ranks, got {n}. Use a batch size of at least the world size "
                "(--batch-size), or fewer processes."
            )
        mine = split_batch(batch, world)[rank]
        return mine, int(mine[0].shape[0]) * world / n

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
        """Forward and backward of this rank's batch; gradients averaged across ranks.

        Args:
            model: The model (on ``main_device``).
            batch: This rank's batch, or with ``shard`` the full batch (moved to
                ``main_device``).
            loss_fn: ``loss_fn(model, batch) -> (mean loss, logits, targets)``.
            scale: Factor on the gradient (``1 / n`` for gradient accumulation).
            outputs: Also return this rank's logits and targets as NumPy (for metrics).
            sync: False holds the gradients for the next synchronised call (no communication).
            precision: Mixed precision (``em.train``'s ``Precision``): the forward runs under
                its autocast and the loss is scaled by it (fp16). The parameters are float32,
                so the buckets all-reduce float32 gradients.

        Returns:
            A ``ParallelStep``: ``loss`` is this rank's, or with ``shard`` the full batch's;
            the outputs are this rank's rows.
        """
        rows, weight = self._rows(batch)
        local = [t.to_device(self.main_device) for t in rows]
        loss, logits, targets, scaled = forward_backward_loss(
            loss_fn, model, local, weight * scale, precision
        )
        if sync:
            grads = self.ddp.backward(scaled, model)
        else:
            with self.ddp.no_sync():
                grads = self.ddp.backward(scaled, model)
        value = self._batch_loss(loss, weight) if self.shard else float(loss.item())
        lg = logits.without_autodiff().to_numpy() if outputs and logits is not None else None
        tg = targets.without_autodiff().to_numpy() if outputs and targets is not None else None
        n = int(batch[0].shape[0]) if self.shard else int(local[0].shape[0])
        return ParallelStep(grads, value, n, lg, tg)

    def _batch_loss(self, loss: Tensor, weight: float) -> float:
        """The full batch's mean loss: the ranks' losses weighted by their rows, summed."""
        raw = loss.without_autodiff()._raw.detach().reshape(1).double()
        total = self.group.all_reduce([raw * (weight / self.group.world_size)], average=False)
        return float(total[0].item())

    def close(self) -> None:
        """Nothing to stop: the process group belongs to the caller (``group.close()``)."""


def parallel_for(devices: Any) -> DataParallel | DistributedSteps:
    """``Learner``'s ``devices`` argument as the object its loop trains through.

    Args:
        devices: A list of ``em.Device`` (in-process replicas), a ``ProcessGroup`` or a
            ``DistributedDataParallel`` (this process is one rank of a ``torchrun`` job), or
            a ready ``DataParallel`` / ``DistributedSteps`` (returned as it is).

    Raises:
        DeviceError: ``devices`` is none of these.
    """
    if isinstance(devices, Sequence) and not isinstance(devices, (str, bytes)):
        return DataParallel(devices)
    if isinstance(devices, (DataParallel, DistributedSteps)):  # built by the caller (the CLI)
        return devices
    from .ddp import DistributedDataParallel
    from .group import ProcessGroup

    if isinstance(devices, DistributedDataParallel):
        return DistributedSteps(devices)
    if isinstance(devices, ProcessGroup):
        return DistributedSteps(DistributedDataParallel(devices))
    raise DeviceError(
        f"Learner: expected devices= as a list of em.Device, a ProcessGroup or a "
        f"DistributedDataParallel, got {type(devices).__name__}. Example: "
        "devices=[em.Device.cuda(0), em.Device.cuda(1)], or "
        "devices=em.distributed.ProcessGroup.from_env() under torchrun."
    )
