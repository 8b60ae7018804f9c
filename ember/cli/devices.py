"""``ember train --devices``: one device, in-process replicas, or one rank of a ``torchrun`` job.

- ``--devices cuda:0,cuda:1`` (or ``torch:cpu,torch:cpu``, ``cpu,cpu``): one process, one forked
  replica per device in worker threads (``em.distributed.DataParallel``); each batch is split
  along dim 0 and the gradients are combined on the first device.
- ``torchrun --nproc_per_node=N -m ember train ...`` (detected from ``torchrun``'s variables) or
  ``--devices ddp``: this process is one rank (``em.distributed.ProcessGroup``, NCCL on CUDA,
  Gloo on CPU) on ``cuda:LOCAL_RANK`` (or the CPU). Every rank reads the same seeded batches and
  keeps its own disjoint rows of each; gradients are all-reduced during backward. Only rank 0
  writes the run directory and shows the display; the group is left at exit (``close``).

``--batch-size`` is the global batch in all three forms, so the runs train the same model.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.creation import seed as seed_all
from .._core.device import Device, parse_device
from ..errors import DeviceError, EmberError
from ..train.callbacks import Callback

if TYPE_CHECKING:
    from ..distributed.group import ProcessGroup
    from ..train.learner import Learner

TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
DDP = "ddp"


def devices_arg(spec: str) -> str:
    """``--devices``: ``ddp`` or a comma-separated device list, checked and normalised."""
    s = spec.strip().lower()
    if s == DDP:
        return s
    parts = [p.strip() for p in s.split(",")]
    if not s or any(not p for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated device list such as cuda:0,cuda:1, or ddp; got {spec!r} "
            "(an empty entry)"
        )
    if DDP in parts:
        raise argparse.ArgumentTypeError(
            f"ddp stands alone (one process per device under torchrun), got {spec!r}; pass "
            "--devices ddp, or a list of devices for replicas in one process"
        )
    for p in parts:
        try:
            parse_device(p)
        except DeviceError as e:
            raise argparse.ArgumentTypeError(f"entry {p!r} of {spec!r}: {e}") from None
    return ",".join(parts)


def under_torchrun() -> bool:
    """True when ``torchrun`` started this process (all of its variables are set)."""
    return all(k in os.environ for k in TORCHRUN_ENV)


def wants_ddp(spec: str | None) -> bool:
    """``--devices ddp``, or no ``--devices`` in a process ``torchrun`` started."""
    return spec == DDP or (spec is None and under_torchrun())


def launch_rank(spec: str | None) -> int:
    """This process's rank (``RANK``) when it trains as a DDP rank, else 0; read before the
    group is joined, so that only rank 0 creates the output directory."""
    return int(os.environ.get("RANK", "0")) if wants_ddp(spec) else 0


@dataclass
class Plan:
    """How ``ember train`` places the run.

    Attributes:
        device: Where the model is built and batches are loaded: ``--device``, the first of
            ``--devices``, or this rank's device.
        parallel: ``Learner(devices=...)``: None, a ``DataParallel`` or a ``DistributedSteps``.
        group: The process group of a DDP rank, else None.
        label: The placement, for the banner.
    """

    device: Device
    parallel: Any
    group: ProcessGroup | None
    label: str

    @property
    def rank(self) -> int:
        return 0 if self.group is None else self.group.rank

    @property
    def writes(self) -> bool:
        """Whether this process writes the run directory and shows the display (rank 0)."""
        return self.rank == 0

    def close(self) -> None:
        """Leave the process group (``destroy_process_group``); nothing for one process."""
        if self.group is not None:
            self.group.close()


def plan_of(devices: str | None, device: str | None) -> Plan:
    """The ``Plan`` of ``--devices`` and ``--device``; DDP joins the ``torchrun`` job here.

    Raises:
        EmberError: ``--devices ddp`` outside ``torchrun``, or a NumPy ``--device`` for DDP.
        DeviceError: A device of the list does not exist here.
    """
    if wants_ddp(devices):
        return _ddp_plan(device)
    if devices is None:
        from .tasks import device_of

        one = device_of(device)
        return Plan(one, None, None, str(one))
    from ..distributed.replicas import DataParallel

    devs = [parse_device(p) for p in devices.split(",")]
    label = f"{len(devs)} replicas on {', '.join(map(str, devs))}"
    return Plan(devs[0], DataParallel(devs), None, label)


def _ddp_plan(device: str | None) -> Plan:
    missing = [k for k in TORCHRUN_ENV if k not in os.environ]
    if missing:
        raise EmberError(
            "ember train --devices ddp: expected the variables torchrun sets "
            f"({', '.join(TORCHRUN_ENV)}), missing {', '.join(missing)}. Launch one process "
            "per device with: torchrun --nproc_per_node=N -m ember train ... (or pass "
            "--devices cuda:0,cuda:1 for replicas in one process)."
        )
    backend = None
    if device is not None:
        kind = parse_device(device)
        if kind.backend_name != "torch":
            raise EmberError(
                f"ember train: DDP all-reduces torch tensors, got --device {device} (the NumPy "
                "backend). Pass --device torch:cpu (Gloo) or --device cuda (NCCL; each rank "
                "takes cuda:LOCAL_RANK), or leave --device out."
            )
        backend = "nccl" if kind.is_cuda else "gloo"
    from ..distributed.ddp import DistributedDataParallel
    from ..distributed.group import ProcessGroup
    from ..distributed.steps import DistributedSteps

    group = ProcessGroup.from_env(backend)
    steps = DistributedSteps(DistributedDataParallel(group), shard=True)
    label = f"rank {group.rank} of {group.world_size} ({group.backend}) on {group.device()}"
    return Plan(group.device(), steps, group, label)


class RankSeed(Callback):
    """Gives each DDP rank but rank 0 its own random stream (dropout masks) as training starts
    or resumes, drawn from the run's seed, the rank and the step; rank 0 keeps the run's."""

    def __init__(self, seed: int, rank: int) -> None:
        self.seed = seed
        self.rank = rank

    def on_fit_start(self, learner: Learner) -> None:
        if self.rank > 0:
            mixed = np.random.SeedSequence([self.seed, self.rank, learner.steps])
            seed_all(int(mixed.generate_state(1)[0]))
