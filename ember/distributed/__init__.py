"""Training on several devices (SEMANTICS §10).

- In one process: ``DataParallel`` runs forked replicas in worker threads and combines their
  gradients on the main device; ``em.train.Learner(..., devices=[...])`` uses it.
- Across processes (``torchrun``): ``ProcessGroup.from_env()`` joins the job on
  ``torch.distributed`` (NCCL on GPUs, Gloo on CPUs) and ``DistributedDataParallel.backward``
  averages gradients across ranks, overlapping the all-reduces with backward (``no_sync()`` for
  gradient accumulation). These two import PyTorch on first use. A rank that dies, raises or
  hangs makes the others raise ``DistributedError`` within the group's ``timeout_s``.
- ``Learner(devices=group)`` (a ``ProcessGroup``) trains one rank of a ``torchrun`` job.
"""

from typing import Any

from ..errors import DistributedError as DistributedError
from .replicas import DataParallel as DataParallel
from .replicas import ParallelStep as ParallelStep
from .replicas import split_batch as split_batch

_LAZY = {"ProcessGroup": "group", "DistributedDataParallel": "ddp"}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'ember.distributed' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
