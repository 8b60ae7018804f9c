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
from ..errors import DeviceError
from .replicas import DataParallel, LossStep, ParallelStep

if TYPE_CHECKING:  # ddp.py imports torch; a list of NumPy devices never needs it
    from .ddp import DistributedDataParallel


class DistributedSteps:
    """One rank's training steps for ``Learner``: the batch is this rank's shard.

    ``place`` moves the model to the rank's device and gives it rank 0's values; ``backward``
    returns the gradients averaged over the ranks. With ``sync=False`` (every micro-step of a
    gradient accumulation but the last) it communicates nothing (``ddp.no_sync()``) and returns
    empty gradients; the synchronised micro-step returns the average of the whole accumulation.

    Args:
        ddp: The ``DistributedDataParallel`` of this job (its group and bucket size).
    """

    def __init__(self, ddp: DistributedDataParallel) -> None:
        self.ddp = ddp
        self.group = ddp.group

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

    def backward(
        self,
        model: Any,
        batch: Sequence[Tensor],
        loss_fn: LossStep,
        *,
        scale: float = 1.0,
        outputs: bool = False,
        sync: bool = True,
    ) -> ParallelStep:
        """Forward and backward of this rank's ``batch``; gradients averaged across ranks.

        Args:
            model: The model (on ``main_device``).
            batch: This rank's batch (moved to ``main_device``).
            loss_fn: ``loss_fn(model, batch) -> (mean loss, logits, targets)``.
            scale: Factor on the gradient (``1 / n`` for gradient accumulation).
            outputs: Also return this rank's logits and targets as NumPy (for metrics).
            sync: False holds the gradients for the next synchronised call (no communication).

        Returns:
            A ``ParallelStep`` whose ``loss`` and outputs are this rank's.
        """
        local = [t.to_device(self.main_device) for t in batch]
        loss, logits, targets = loss_fn(model, local)
        scaled = loss if scale == 1.0 else loss * scale
        if sync:
            grads = self.ddp.backward(scaled, model)
        else:
            with self.ddp.no_sync():
                grads = self.ddp.backward(scaled, model)
        lg = logits.without_autodiff().to_numpy() if outputs and logits is not None else None
        tg = targets.without_autodiff().to_numpy() if outputs and targets is not None else None
        return ParallelStep(grads, float(loss.item()), int(local[0].shape[0]), lg, tg)

    def close(self) -> None:
        """Nothing to stop: the process group belongs to the caller (``group.close()``)."""


def parallel_for(devices: Any) -> DataParallel | DistributedSteps:
    """``Learner``'s ``devices`` argument as the object its loop trains through.

    Args:
        devices: A list of ``em.Device`` (in-process replicas), a ``ProcessGroup`` or a
            ``DistributedDataParallel`` (this process is one rank of a ``torchrun`` job).

    Raises:
        DeviceError: ``devices`` is none of these.
    """
    if isinstance(devices, Sequence) and not isinstance(devices, (str, bytes)):
        return DataParallel(devices)
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
