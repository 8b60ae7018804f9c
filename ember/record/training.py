"""Training records: module, optimizer and scheduler state plus the step, in one file."""

from __future__ import annotations

import copy
import json
import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.tensor import Tensor
from .._generator import get_rng_state, set_rng_state
from ..errors import EmberError
from ..nn.module import _fold_tied
from .checksum import CHECKED_VERSION
from .errors import RecordError
from .io import atomic_write, decode, encode, read_bytes
from .safetensors import _dump_ids, _parse_ids

if TYPE_CHECKING:
    from ..nn.module import Module
    from ..optim.base import Optimizer
    from ..optim.lr import LrScheduler

TRAINING_FORMAT = "ember.training"
_DIGITS = re.compile(r"[0-9]+")


def save_training(
    path: str | os.PathLike[str],
    module: Module,
    optimizer: Optimizer | None = None,
    scheduler: LrScheduler | None = None,
    step: int = 0,
) -> None:
    """Write a training record atomically (one safetensors file).

    Tensors are stored as ``model/<name>`` and ``optim/<param name>/<key>``; the step, the
    scheduler position, the parameter ids and the default generators' state
    (``em.get_rng_state()``, so a resumed run with dropout continues bit for bit) go in the
    metadata.

    Example:
        >>> save_training("run.safetensors", model, optim, sched, step=1200)
    """
    tensors: dict[str, Tensor] = {f"model/{k}": v for k, v in module.state_dict().items()}
    if optimizer is not None:
        tensors.update({f"optim/{k}": v for k, v in optimizer.state_dict(module).items()})
    meta = {
        "format": TRAINING_FORMAT,
        "version": CHECKED_VERSION,
        "step": str(int(step)),
        "param_ids": _dump_ids(module),
        "scheduler": json.dumps(None if scheduler is None else scheduler.state()),
        "rng": json.dumps(get_rng_state()),
    }
    atomic_write(path, encode(tensors, meta))


def load_training(
    path: str | os.PathLike[str],
    module: Module,
    optimizer: Optimizer | None = None,
    scheduler: LrScheduler | None = None,
) -> int:
    """Restore a record written by ``save_training`` in place; returns the saved step.

    The default generators get the record's RNG state back (``em.set_rng_state``), so the
    random draws after the load (dropout masks) are the ones after the save.

    Everything is checked before anything changes — the checksum, the metadata (step, unique
    parameter ids, scheduler state), the module's names, shapes and dtypes, and the optimizer
    state's shapes and dtypes against the parameters — and a failure leaves ``module``,
    ``optimizer`` and ``scheduler`` as they were.

    Raises:
        RecordError: The file is missing, damaged, not a training record, names differ, or the
            optimizer or scheduler state does not fit.
        ShapeError, DTypeError: Module shapes or dtypes differ.
    """
    op = "load_training"
    arrays, meta = decode(op, path, read_bytes(op, path))
    if meta.get("format") != TRAINING_FORMAT:
        raise RecordError(
            f"load_training: {os.fspath(path)!r} is not a training record (format "
            f"{meta.get('format')!r}). Module files load with module.load(path)."
        )
    model: dict[str, Tensor | np.ndarray] = {}
    optim: dict[str, np.ndarray] = {}
    for key, a in arrays.items():
        kind, _, name = key.partition("/")
        (model if kind == "model" else optim)[name] = a
    tied = module._tied_names()
    if tied and any(n in model for n in tied):
        model = _fold_tied(model, tied)  # RecordError for a record of the untied model
    step = _step(meta)
    ids = _parse_ids(op, meta)
    sched_state = _scheduler_state(meta, scheduler)
    rng = _rng_state(meta)
    opt_state = optimizer._checked_state(optim, module) if optimizer is not None else None
    undo = _Snapshot(module, optimizer, scheduler)
    module.load_state_dict(model, ids=ids)  # checks every name, shape and dtype first
    try:
        if optimizer is not None and opt_state is not None:
            params = dict(module.named_parameters())
            optimizer._install_state({params[n].id: s for n, s in opt_state.items()})
        if scheduler is not None:
            scheduler.load_state(sched_state)
        if rng is not None:
            try:
                set_rng_state(rng)
            except EmberError as e:
                raise RecordError(
                    f"load_training: the record's RNG state does not fit ({e}). Write the record "
                    "again or load a backup."
                ) from None
    except BaseException:
        undo.restore()
        raise
    return step


def _step(meta: dict[str, str]) -> int:
    text = meta.get("step")
    if text is None or not _DIGITS.fullmatch(text):
        raise RecordError(
            f"load_training: the record's step metadata is damaged (expected a count >= 0, got "
            f"{text!r}). Write the record again or load a backup."
        )
    return int(text)


def _rng_state(meta: dict[str, str]) -> dict[str, Any] | None:
    """The saved RNG state (``None`` in records written before it was stored)."""
    text = meta.get("rng")
    if text is None:
        return None
    problem: str | None
    try:
        state = json.loads(text)
    except ValueError as e:
        state, problem = None, f"not JSON: {e}"
    else:
        problem = None if isinstance(state, dict) else f"a JSON {type(state).__name__}"
    if problem is not None:
        raise RecordError(
            f"load_training: the record's rng metadata is damaged ({problem}; expected the "
            "object em.get_rng_state() returns). Write the record again or load a backup."
        )
    return state


def _scheduler_state(meta: dict[str, str], scheduler: LrScheduler | None) -> Any:
    """The saved scheduler state, checked by loading it into a copy of ``scheduler``."""
    try:
        state = json.loads(meta.get("scheduler", "null"))
    except ValueError as e:
        raise RecordError(
            f"load_training: the record's scheduler metadata is not JSON ({e}). Write the "
            "record again or load a backup."
        ) from None
    if scheduler is None:
        return state
    if state is None:
        raise RecordError(
            "load_training: the record holds no scheduler state; pass scheduler=None or "
            "save the record with its scheduler."
        )
    step = state.get("step") if isinstance(state, dict) else None
    problem = None
    if not isinstance(state, dict):
        problem = f"expected a JSON object, got {type(state).__name__}"
    elif not (type(step) is int and step >= 0):
        problem = f"expected 'step' a count >= 0, got {step!r}"
    else:
        try:
            copy.deepcopy(scheduler).load_state(state)
        except Exception as e:
            problem = f"{type(scheduler).__name__}.load_state rejects it: {type(e).__name__}: {e}"
    if problem is not None:
        raise RecordError(
            f"load_training: the record's scheduler state {state!r} does not fit ({problem}). "
            "Pass the scheduler type the run was saved with, or load a backup."
        )
    return state


class _Snapshot:
    """What ``load_training`` may change, to put back if a late step fails."""

    def __init__(
        self, module: Module, optimizer: Optimizer | None, scheduler: LrScheduler | None
    ) -> None:
        self.module = module
        self.values = module.state_dict()
        self.ids = {name: p.id for name, p in module.named_parameters()}
        self.optimizer = optimizer
        self.opt = (dict(optimizer._state), set(optimizer._shared)) if optimizer else None
        self.scheduler = scheduler
        self.rng = get_rng_state()
        # the scheduler's attributes, not its state(): putting them back cannot fail
        self.sched = copy.deepcopy(vars(scheduler)) if scheduler is not None else None

    def restore(self) -> None:
        set_rng_state(self.rng)
        self.module.load_state_dict(self.values, ids=self.ids)
        if self.optimizer is not None and self.opt is not None:
            self.optimizer._state, self.optimizer._shared = self.opt
        if self.scheduler is not None and self.sched is not None:
            vars(self.scheduler).clear()
            vars(self.scheduler).update(self.sched)
