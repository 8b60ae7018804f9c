"""Training records: module, optimizer and scheduler state plus the step, in one file."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import numpy as np

from ..tensor.tensor import Tensor
from .errors import RecordError
from .io import atomic_write, decode, encode, read_bytes
from .safetensors import _dump_ids, _parse_ids

if TYPE_CHECKING:
    from ..nn.module import Module
    from ..optim.base import Optimizer
    from ..optim.lr import LrScheduler

TRAINING_FORMAT = "ember.training"


def save_training(
    path: str | os.PathLike[str],
    module: Module,
    optimizer: Optimizer | None = None,
    scheduler: LrScheduler | None = None,
    step: int = 0,
) -> None:
    """Write a training record atomically (one safetensors file).

    Tensors are stored as ``model/<name>`` and ``optim/<param name>/<key>``; the step, the
    scheduler position and the parameter ids go in the metadata.

    Example:
        >>> save_training("run.safetensors", model, optim, sched, step=1200)
    """
    tensors: dict[str, Tensor] = {f"model/{k}": v for k, v in module.state_dict().items()}
    if optimizer is not None:
        tensors.update({f"optim/{k}": v for k, v in optimizer.state_dict(module).items()})
    meta = {
        "format": TRAINING_FORMAT,
        "version": "1",
        "step": str(int(step)),
        "param_ids": _dump_ids(module),
        "scheduler": json.dumps(None if scheduler is None else scheduler.state()),
    }
    atomic_write(path, encode(tensors, meta))


def load_training(
    path: str | os.PathLike[str],
    module: Module,
    optimizer: Optimizer | None = None,
    scheduler: LrScheduler | None = None,
) -> int:
    """Restore a record written by ``save_training`` in place; returns the saved step.

    Raises:
        RecordError: The file is missing, damaged, not a training record, or names differ.
        ShapeError, DTypeError: Module shapes or dtypes differ.
    """
    arrays, meta = decode("load_training", path, read_bytes("load_training", path))
    if meta.get("format") != TRAINING_FORMAT:
        raise RecordError(
            f"load_training: {os.fspath(path)!r} is not a training record (format "
            f"{meta.get('format')!r}). Module files load with module.load(path)."
        )
    model: dict[str, np.ndarray] = {}
    optim: dict[str, np.ndarray] = {}
    for key, a in arrays.items():
        kind, _, name = key.partition("/")
        (model if kind == "model" else optim)[name] = a
    try:
        step = int(meta["step"])
        sched_state = json.loads(meta.get("scheduler", "null"))
    except (KeyError, ValueError) as e:
        raise RecordError(f"load_training: the record's metadata is damaged ({e}).") from None
    module.load_state_dict(model, ids=_parse_ids("load_training", meta))
    if optimizer is not None:
        optimizer.load_state_dict({k: Tensor.from_data(v) for k, v in optim.items()}, module)
    if scheduler is not None:
        if sched_state is None:
            raise RecordError(
                "load_training: the record holds no scheduler state; pass scheduler=None or "
                "save the record with its scheduler."
            )
        scheduler.load_state(sched_state)
    return step
