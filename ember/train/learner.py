"""``Learner``: fits a model with metrics, a live display, records, resume and early stopping."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .._core.tensor import Tensor
from .._generator import get_rng_state, set_rng_state
from ..checkpoint.spelling import parse_strategy
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..errors import EmberError
from .callbacks import Callback
from .captured import CapturedSteps
from .display import Display, make_display
from .errors import NonFiniteError
from .logging import MetricLog, plot_curves
from .metrics import LearningRate, Metric, StepOutput, default_metrics
from .precision import Precision as _Precision

StepResult = tuple[Tensor, Tensor | None, Tensor | None]
LossFn = Callable[[Any, Sequence[Tensor]], StepResult]


class Loader(Protocol):
    """What ``fit`` iterates: ``DataLoader`` and ``RandomBlocks`` both qualify."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Sequence[Tensor]]: ...

    def state_dict(self) -> dict[str, int]: ...

    def load_state_dict(self, state: dict[str, int]) -> None: ...


def classification_step(model: Any, batch: Sequence[Tensor]) -> StepResult:
    """Default loss step: ``cross_entropy(model(x), y)``; logits (..., K) are flattened to (N, K).

    Returns:
        The scalar loss, logits (N, K) and targets (N,) for the metrics.
    """
    from ..nn import functional as F

    x, y = batch[0], batch[-1]
    logits = model(x)
    if logits.ndim > 2:  # (B, T, K) -> (B * T, K) for language models
        logits = logits.reshape((-1, logits.shape[-1]))
        y = y.reshape((-1,))
    return F.cross_entropy(logits, y), logits, y


def _numpy(t: Tensor | None) -> np.ndarray | None:
    return None if t is None else t.without_autodiff().to_numpy()


class Learner:
    """Trains ``model`` with ``optimizer`` (``optim.step(lr, model, grads) -> model``).

    Args:
        model: An ``em.nn.Module`` whose parameters live on an autodiff device.
        optimizer: An ``em.optim`` optimizer.
        lr: A learning rate, or an iterator of rates (an ``em.optim.lr`` scheduler), advanced
            once per optimizer step; a scheduler built with ``per_epoch=True`` once per epoch,
            and ``ReduceOnPlateau`` also hears its ``monitor`` metric after each epoch.
        loss_fn: ``loss_fn(model, batch) -> (loss, logits, targets)``; default
            ``classification_step``.
        metrics: Metrics computed on train and validation data (default: loss, accuracy, top-5).
        output_dir: Where records (``records/epoch-NNNN``), ``metrics.csv``/``.jsonl``, the final
            ``model.safetensors`` and ``curves.png`` go; nothing is written when None.
        keep_records: How many per-epoch records to keep (the oldest are deleted).
        grad_accumulation: Micro-batches whose gradients are summed (each loss scaled by 1/n)
            before one optimizer step.
        checkpointing: True switches the model to gradient checkpointing (``Balanced``), False to
            ``Disabled``, None keeps the model's strategy; a ``GradientCheckpointingStrategy``
            (e.g. ``budget(fraction=0.4)``) or its spelling (``"disabled"``, ``"balanced"``,
            ``"budget:0.4"``, ``"budget:512MiB"``) selects that one.
        callbacks: ``Callback``s such as ``EarlyStopping``.
        display: "auto", "tty", "plain", "none" or a ``Display``.
        best_metric: A column such as "valid_loss" (lower is better; "accuracy" columns: higher);
            whenever it improves, the model is written to ``best.safetensors`` and ``self.best``
            records the value, epoch and step. An epoch with a non-finite value or loss never
            becomes best.
        devices: None (the default) trains on the model's own device. A list of devices trains
            one forked replica per device in worker threads (``em.distributed.DataParallel``):
            each batch is split along dim 0, the shards' gradients are combined on
            ``devices[0]`` into the full-batch mean gradient, and the model (moved to
            ``devices[0]`` if it lives elsewhere) takes one step. ``loss_fn`` must return a
            mean over its batch's rows. A ``ProcessGroup`` (or ``DistributedDataParallel``)
            trains this process as one rank of a ``torchrun`` job: each rank's loader gives its
            own batches, gradients are averaged across ranks during backward, and gradient
            accumulation all-reduces only on the last micro-step (``ddp.no_sync``).
        allow_nonfinite: False (the default) stops ``fit`` with ``NonFiniteError`` as soon as
            training diverges: a batch's training loss (checked every batch, from the value
            the metrics read anyway: no extra device synchronisation), the validation loss
            (each epoch) or a parameter (each epoch, before anything is saved) is NaN or
            infinite. Nothing diverged is written: the newest record stays the last good state.
            True trains on regardless (a non-finite metric never becomes ``best``).
        precision: "fp32" (the default), "bf16" or "fp16": the forward passes of training and
            evaluation run inside ``em.amp.autocast`` of that dtype (parameters and optimizer
            state stay float32); "fp16" also scales the loss with an ``em.amp.GradScaler``
            (a step whose gradients overflow is skipped; the scale is kept in records).
            With ``devices=`` every replica thread and every DDP rank runs its forward under
            the same autocast and scales its own loss; the float32 gradients are combined (or
            all-reduced) and one scaler unscales and steps the model.
        capture: True runs each training step through ``em.capture`` (``ember/train/
            captured.py``): on a CUDA device one CUDA-graph replay per batch (forward, backward,
            clipping and the update), recorded once per batch shape; on CPU backends the eager
            step. Single-device, "fp32" or "bf16" only (fp16's loss scaler reads the overflow
            flag on the host). A ``loss_fn`` must not read values on the host.

    Example:
        >>> learner = Learner(model, em.optim.Adam(), lr=1e-3, output_dir="runs/demo")
        >>> history = learner.fit(train_loader, valid_loader, epochs=5)
        >>> history[-1]["valid_accuracy"]
        0.97...
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        *,
        lr: float | Iterator[float] = 1e-3,
        loss_fn: LossFn | None = None,
        metrics: Sequence[Metric] | None = None,
        output_dir: str | Path | None = None,
        keep_records: int = 3,
        grad_accumulation: int = 1,
        checkpointing: bool | str | GradientCheckpointingStrategy | None = None,
        callbacks: Iterable[Callback] = (),
        display: str | Display = "auto",
        best_metric: str | None = None,
        devices: Sequence[Any] | None = None,
        allow_nonfinite: bool = False,
        precision: str = "fp32",
        capture: bool = False,
    ) -> None:
        if grad_accumulation < 1:
            raise ValueError(f"Learner: expected grad_accumulation >= 1, got {grad_accumulation}.")
        if keep_records < 1:
            raise ValueError(f"Learner: expected keep_records >= 1, got {keep_records}.")
        self.model = model
        self.optimizer = optimizer
        self._amp = _Precision(precision)
        if capture and (devices is not None or precision == "fp16"):
            raise ValueError(
                "Learner: capture=True trains on one device in fp32 or bf16, got "
                f"devices={devices!r}, precision={precision!r}. fp16's loss scaler reads the "
                "overflow flag on the host each step; drop capture or use bf16."
            )
        self._captured: CapturedSteps | None = None  # set once the loss step is known
        self._capture = bool(capture)
        self._lr_const = float(lr) if isinstance(lr, (int, float)) else None
        self._schedule: Iterator[float] | None = None if self._lr_const is not None else iter(lr)  # type: ignore[arg-type]
        self.lr = self._lr_const if self._lr_const is not None else math.nan
        self.loss_fn: LossFn = loss_fn or classification_step
        if self._capture:
            self._captured = CapturedSteps(self.loss_fn, self._amp)
        self.metrics: list[Metric] = list(metrics) if metrics is not None else default_metrics()
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.keep_records = keep_records
        self.grad_accumulation = grad_accumulation
        # a spelled strategy is read here, so a bad one fails before training starts
        self.checkpointing = (
            parse_strategy(checkpointing) if isinstance(checkpointing, str) else checkpointing
        )
        self.callbacks = list(callbacks)
        self.display: Display = make_display(display) if isinstance(display, str) else display
        self.epoch = 0  # completed epochs
        self.steps = 0  # optimizer steps taken
        self._epoch_lr: tuple[int, float] | None = None  # (epoch, rate) of a per-epoch schedule
        self.history: list[dict[str, float]] = []
        self.stop_training = False
        self._epochs = 0
        self.best_metric = best_metric
        self.best: dict[str, float] | None = None
        self.allow_nonfinite = bool(allow_nonfinite)
        self._log = MetricLog(self.output_dir) if self.output_dir is not None else None
        self._parallel: Any = None
        if devices is not None:  # replicas in worker threads or DDP ranks (SEMANTICS §10)
            from ..distributed.steps import parallel_for

            self._parallel = parallel_for(devices)
            self.model = self._parallel.place(self.model)

    # ------------------------------------------------------------------ learning rate
    def _next_lr(self) -> float:
        if self._schedule is None:
            assert self._lr_const is not None
            return self._lr_const
        # an em.optim.lr schedule built with per_epoch=True moves once per epoch
        per_epoch = getattr(self._schedule, "per_epoch", False)
        if per_epoch and self._epoch_lr is not None and self._epoch_lr[0] == self.epoch:
            return self._epoch_lr[1]
        try:
            value = float(next(self._schedule))
        except StopIteration:
            raise EmberError(
                f"Learner: the learning-rate schedule ended after {self.steps} steps; give it at "
                "least epochs * steps-per-epoch values."
            ) from None
        if per_epoch:
            self._epoch_lr = (self.epoch, value)
        return value

    def _scheduler(self) -> Any:
        from ..optim.lr import LrScheduler

        return self._schedule if isinstance(self._schedule, LrScheduler) else None

    def _report_to_schedule(self, row: dict[str, float]) -> None:
        """Give a metric-driven schedule (``em.optim.lr.ReduceOnPlateau``) the epoch's metric:
        its ``monitor`` column (``valid_loss`` falls back to ``train_loss`` without validation)."""
        report = getattr(self._schedule, "report", None)
        if report is None:
            return
        key = str(getattr(self._schedule, "monitor", "valid_loss"))
        if key == "valid_loss" and key not in row:
            key = "train_loss"
        if key not in row:
            raise EmberError(
                f"Learner: the schedule monitors {key!r}, which is not a column of the epoch row; "
                f"available: {sorted(row)}. Build it with monitor= one of them."
            )
        report(row[key])

    # ------------------------------------------------------------------ strategy
    def _apply_checkpointing(self) -> None:
        if self.checkpointing is None:
            return
        params = list(self.model.parameters())
        if not params:
            return
        c = self.checkpointing
        if isinstance(c, GradientCheckpointingStrategy):
            want = c
        else:
            want = (
                GradientCheckpointingStrategy.Balanced
                if c
                else GradientCheckpointingStrategy.Disabled
            )
        value = params[0].val()
        if value.gradient_checkpointing_strategy() == want:
            return
        device = value.device.without_autodiff().autodiff()
        if want != GradientCheckpointingStrategy.Disabled:
            device = device.gradient_checkpointing(budget=want)
        self.model = self.model.fork(device)

    # ------------------------------------------------------------------ one epoch
    def _metric_values(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}_{m.name}": m.compute() for m in self.metrics}

    def _train_epoch(self, train: Loader, epochs: int) -> dict[str, float]:
        from ..optim import GradientsAccumulator

        self.model.train()
        for m in self.metrics:
            m.reset()
        lr_metric = LearningRate()
        needs_logits = any(m.needs_logits for m in self.metrics)
        total = len(train)
        self.display.start_phase("train", self.epoch + 1, epochs, total)
        acc = GradientsAccumulator() if self.grad_accumulation > 1 else None
        pending = 0
        examples = 0
        tokens = 0
        t0 = time.perf_counter()
        done = 0
        scale = 1.0 if acc is None else 1.0 / self.grad_accumulation
        for batch in train:
            if self._captured is not None and acc is None:  # forward, backward and update
                step = self._captured_step(batch, needs_logits)
            else:
                last = acc is None or pending + 1 == self.grad_accumulation or done + 1 == total
                step = self._backward(batch, scale, needs_logits, sync=last)
            grads, loss_value, logits_np, targets_np = step
            if not (self.allow_nonfinite or math.isfinite(loss_value)):  # read for the metrics
                raise self._nonfinite(
                    "train_loss",
                    "the training loss",
                    loss_value,
                    self.steps + 1,
                    f" (batch {done + 1} of {total})",
                )
            n = int(batch[0].shape[0])
            examples += n
            tokens += batch[0].numel() if batch[0].ndim == 2 and not batch[0].dtype.is_float else 0
            if acc is not None:
                acc.accumulate(self.model, grads)
                pending += 1
            if grads is None:
                pass  # the captured step updated the model already
            elif acc is None or pending == self.grad_accumulation:
                self._step(acc.grads() if acc is not None else grads)
                pending = 0
            out = StepOutput(loss_value, n, logits_np, targets_np, self.lr)
            for m in self.metrics:
                m.update(out)
            lr_metric.update(out)
            done += 1
            self.display.step(done, {"loss": self.metrics[0].compute(), "lr": self.lr})
        if acc is not None and pending:
            self._step(acc.grads())
        elapsed = time.perf_counter() - t0
        row = self._metric_values("train")
        row["lr"] = lr_metric.compute()
        row["examples_per_s"] = examples / elapsed if elapsed > 0 else math.nan
        if tokens:
            row["tokens_per_s"] = tokens / elapsed if elapsed > 0 else math.nan
        row["time_s"] = elapsed
        return row

    def _backward(
        self, batch: Sequence[Tensor], scale: float, needs_logits: bool, *, sync: bool = True
    ) -> tuple[Any, float, np.ndarray | None, np.ndarray | None]:
        """Gradients (``GradientsParams``, times ``scale``) of one batch, its mean loss, and the
        logits and targets as NumPy when the metrics need them. ``sync=False`` (an accumulation
        micro-step before the last) lets distributed training skip the all-reduce."""
        if self._parallel is not None:
            r = self._parallel.backward(
                self.model,
                batch,
                self.loss_fn,
                scale=scale,
                outputs=needs_logits,
                sync=sync,
                precision=self._amp,
            )
            return r.grads, r.loss, r.logits, r.targets
        from ..optim import GradientsParams

        if self._captured is not None:  # a captured micro-step of gradient accumulation
            loss, logits, targets, grads = self._captured.micro(
                self.model, tuple(batch), scale, needs_logits
            )
            return grads, float(loss.item()), _numpy(logits), _numpy(targets)
        with self._amp.autocast():
            loss, logits, targets = self.loss_fn(self.model, batch)
        scaled = self._amp.scale(loss if scale == 1.0 else loss * scale)
        grads = GradientsParams.from_grads(scaled.backward(), self.model)
        return (
            grads,
            float(loss.item()),
            _numpy(logits) if needs_logits else None,
            _numpy(targets) if needs_logits else None,
        )

    def _step(self, grads: Any) -> None:
        self.lr = self._next_lr()
        if self._captured is not None:
            self._captured.apply(self.model, self.optimizer, grads, self.lr)
        else:
            self.model = self._amp.step(self.optimizer, self.lr, self.model, grads)
        self.steps += 1

    def _captured_step(
        self, batch: Sequence[Tensor], needs_logits: bool
    ) -> tuple[Any, float, np.ndarray | None, np.ndarray | None]:
        """One whole captured training step (``capture=True``, no accumulation): the loss and
        the metrics' logits and targets, read after the call."""
        assert self._captured is not None
        self.lr = self._next_lr()
        loss, logits, targets = self._captured.whole(
            self.model, self.optimizer, tuple(batch), self.lr, needs_logits
        )
        self.steps += 1
        return None, float(loss.item()), _numpy(logits), _numpy(targets)

    # ------------------------------------------------------------------ divergence
    def _nonfinite(
        self, metric: str, what: str, value: float, step: int, where: str = ""
    ) -> NonFiniteError:
        return NonFiniteError(
            "Learner.fit",
            f"{what} became non-finite ({value}) at epoch {self.epoch + 1} step {step}{where}",
            "nothing of this epoch was saved (the newest record is the last good state). Lower "
            "the learning rate or clip the gradients, or pass allow_nonfinite=True to train on.",
            metric=metric,
            value=value,
            epoch=self.epoch + 1,
            step=step,
        )

    def _check_parameters(self) -> None:
        """Raise ``NonFiniteError`` naming the first parameter holding a NaN or an infinity
        (one small reduction and host read per parameter, once per epoch)."""
        for name, param in self.model.named_parameters():
            value = param.val().without_autodiff()
            if not value.dtype.is_float:
                continue
            probe = float((value * 0.0).sum().item())  # inf * 0 and nan * 0 are nan
            if not math.isfinite(probe):
                raise self._nonfinite(
                    f"parameter {name}",
                    f"parameter {name!r}",
                    probe,
                    self.steps,
                    " (the optimizer update of that step produced NaN or infinite weights)",
                )

    def _check_valid_losses(self, row: dict[str, float]) -> None:
        """After an epoch's validation, before anything is saved."""
        if self.allow_nonfinite:
            return
        for key, value in row.items():
            if key.startswith("valid_") and key.endswith("loss") and not math.isfinite(value):
                raise self._nonfinite(
                    key, f"the validation loss {key!r}", value, self.steps, " (after the epoch)"
                )

    def evaluate(
        self, data: Iterable[Sequence[Tensor]], *, prefix: str = "valid"
    ) -> dict[str, float]:
        """Metrics of the model on ``data`` without gradients (the model is put in ``valid()``
        mode and back in ``train()`` mode afterwards).

        Returns:
            ``{f"{prefix}_{metric}": value}``.
        """
        was_training = bool(getattr(self.model, "training", True))
        self.model.valid()
        for m in self.metrics:
            m.reset()
        needs_logits = any(m.needs_logits for m in self.metrics)
        total = len(data) if isinstance(data, Sized) else 0
        in_fit = prefix == "valid"
        self.display.start_phase(
            prefix, self.epoch + 1 if in_fit else 0, self._epochs if in_fit else 0, total
        )
        try:
            for k, batch in enumerate(data, 1):
                if self._parallel is not None:  # the model lives on the main device
                    batch = [t.to_device(self._parallel.main_device) for t in batch]
                with self._amp.autocast():
                    loss, logits, targets = self.loss_fn(self.model, batch)
                out = StepOutput(
                    float(loss.item()),
                    int(batch[0].shape[0]),
                    _numpy(logits) if needs_logits else None,
                    _numpy(targets) if needs_logits else None,
                )
                for m in self.metrics:
                    m.update(out)
                self.display.step(k, {"loss": self.metrics[0].compute()})
        finally:
            if was_training:
                self.model.train()
        return self._metric_values(prefix)

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        train: Loader,
        valid: Iterable[Sequence[Tensor]] | None = None,
        epochs: int = 1,
        *,
        resume: bool | str | Path = False,
    ) -> list[dict[str, float]]:
        """Train for ``epochs`` epochs (in total, counting epochs done before a resume).

        After each epoch: validation metrics, a table row, callbacks, a record and the logs.

        Args:
            train: Training batches (a loader with ``state_dict``/``load_state_dict``).
            valid: Validation batches, or None.
            epochs: Total number of epochs.
            resume: True resumes from the newest record in ``output_dir``; a path resumes from
                that record directory. The resumed run reproduces the uninterrupted one.

        Returns:
            One row per epoch: ``epoch``, ``train_*`` and ``valid_*`` metrics, ``lr``,
            ``examples_per_s``, ``time_s``.

        Raises:
            NonFiniteError: Training diverged (see ``allow_nonfinite``): a batch's training loss
                (checked every batch), a parameter (every epoch) or a validation loss (every
                epoch) is NaN or infinite. The diverged epoch is neither logged nor saved.
        """
        self._apply_checkpointing()
        if resume:
            if resume is True:
                self._resume_newest(train)
            else:
                self.load_record(resume, train)
        self.stop_training = False
        self._epochs = epochs
        for cb in self.callbacks:
            cb.on_fit_start(self)
        while self.epoch < epochs and not self.stop_training:
            row: dict[str, float] = {"epoch": float(self.epoch + 1)}
            try:
                row.update(self._train_epoch(train, epochs))
                if not self.allow_nonfinite:
                    self._check_parameters()
                if valid is not None:
                    set_epoch = getattr(valid, "set_epoch", None)
                    if set_epoch is not None:  # validation batches depend on the epoch alone
                        set_epoch(self.epoch)
                    row.update(self.evaluate(valid))
                    self._check_valid_losses(row)
            except NonFiniteError:
                if self._parallel is not None:
                    self._parallel.close()
                raise
            self._report_to_schedule(row)
            self.epoch += 1
            self.history.append(row)
            self.display.end_epoch(row)
            for cb in self.callbacks:
                cb.on_epoch_end(self, row)
            self._track_best(row)
            if self._log is not None:
                self._log.append(row)
            if self.output_dir is not None:
                self.save_record(train)
        for cb in self.callbacks:
            cb.on_fit_end(self)
        if self._parallel is not None:
            self._parallel.close()
        if self.output_dir is not None:
            self.model.save(self.output_dir / "model.safetensors")
            png = plot_curves(self.history, self.output_dir / "curves.png")
            if png is None:
                self.display.message(
                    "curves.png skipped: matplotlib is not installed (pip install matplotlib); "
                    "the curves are in metrics.csv"
                )
        return self.history

    def _track_best(self, row: dict[str, float]) -> None:
        key = self.best_metric
        if key is None:
            return
        if key not in row:
            raise KeyError(
                f"Learner: best_metric {key!r} is not a column of the epoch row; available: "
                f"{sorted(row)}."
            )
        value = row[key]
        if not math.isfinite(value) or any(
            k.endswith("loss") and not math.isfinite(v) for k, v in row.items()
        ):  # a diverged epoch (allow_nonfinite) never becomes best, whatever its accuracy
            return
        sign = -1.0 if "accuracy" in key else 1.0
        if self.best is not None and not sign * value < sign * self.best["value"]:
            return
        self.best = {"value": value, "epoch": row["epoch"], "steps": float(self.steps)}
        if self.output_dir is not None:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            self.model.save(self.output_dir / "best.safetensors")

    # ------------------------------------------------------------------ records
    @property
    def records_dir(self) -> Path:
        if self.output_dir is None:
            raise EmberError("Learner: records need an output_dir; pass output_dir=... .")
        return self.output_dir / "records"

    def latest_record(self) -> Path | None:
        """The newest complete ``records/epoch-NNNN`` directory (never an ``.tmp`` one that an
        interrupted save left), or None."""
        from ..record.run import record_dirs

        if self.output_dir is None:
            return None
        found = record_dirs(self.records_dir)
        return found[0] if found else None

    def _resume_newest(self, train: Loader | None) -> Path:
        """Load the newest record that loads; each damaged newer one is reported on the display
        and skipped."""
        from ..record import RecordError
        from ..record.run import record_dirs

        found = record_dirs(self.records_dir) if self.output_dir is not None else []
        if not found:
            raise EmberError(
                f"fit: resume requested but {self.output_dir} has no records; "
                "train without --resume first."
            )
        failures = []
        for path in found:
            try:
                self.load_record(path, train)
            except RecordError as e:
                failures.append(f"{path.name}: {e}")
                self.display.message(f"resume: skipping damaged record {path.name} ({e})")
                continue
            if failures:
                self.display.message(
                    f"resume: continuing from {path.name}, the newest record that loads"
                )
            return path
        raise RecordError(
            f"fit: no record in {self.records_dir} loads: {'; '.join(failures)}. Train without "
            "resume, or restore a record from a backup."
        )

    def save_record(self, train: Loader | None = None) -> Path:
        """Write model, optimizer, schedule position, RNG, loader and callback state.

        The record is written to ``epoch-NNNN.tmp`` and renamed when complete; partial ones
        of interrupted saves are deleted. Keeps the newest ``keep_records`` records; returns
        the new record's directory.
        """
        from ..record import save_training
        from ..record.io import atomic_write
        from ..record.run import clean_partial_records, record_dirs

        path = self.records_dir / f"epoch-{self.epoch:04d}"
        tmp = path.with_name(path.name + ".tmp")
        clean_partial_records(self.records_dir)
        tmp.mkdir(parents=True)
        save_training(
            tmp / "training.safetensors", self.model, self.optimizer, self._scheduler(), self.steps
        )
        state = {
            "epoch": self.epoch,
            "steps": self.steps,
            "lr": self.lr,
            "rng": get_rng_state(),
            "train_loader": train.state_dict() if train is not None else None,
            "callbacks": [cb.state_dict() for cb in self.callbacks],
            "history": self.history,
            "best": self.best,
        }
        if self._amp.scaler is not None:
            state["grad_scaler"] = self._amp.state_dict()
        atomic_write(tmp / "state.json", json.dumps(state).encode())
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
        for p in record_dirs(self.records_dir)[self.keep_records :]:
            shutil.rmtree(p, ignore_errors=True)
        return path

    def load_record(self, path: str | Path, train: Loader | None = None) -> None:
        """Restore everything ``save_record`` wrote, so training continues exactly.

        ``state.json`` and the training record are checked before anything changes;
        ``RecordError`` when either is damaged.
        """
        from ..record import RecordError, load_training
        from ..record.run import read_state

        path = Path(path)
        op = "load_record"
        state = read_state(
            op,
            path / "state.json",
            {
                "epoch": (int,),
                "steps": (int,),
                "lr": (int, float),
                "rng": (dict,),
                "train_loader": (dict, type(None)),
                "callbacks": (list,),
                "history": (list,),
                "best": (dict, type(None)),
            },
        )
        if not all(isinstance(r, dict) for r in state["history"]):
            raise RecordError(
                f"{op}: {str(path / 'state.json')!r} is damaged: a history row is not an "
                "object. Resume from an earlier record."
            )
        sched = self._scheduler()
        load_training(path / "training.safetensors", self.model, self.optimizer, sched)
        try:
            set_rng_state(state["rng"])
            self._amp.load_state_dict(state.get("grad_scaler"))
            for cb, s in zip(self.callbacks, state["callbacks"]):
                cb.load_state_dict(s)
        except (EmberError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise RecordError(
                f"{op}: the RNG or callback state in {str(path / 'state.json')!r} is damaged "
                f"({type(e).__name__}: {e}). Resume from an earlier record."
            ) from None
        if train is not None and state["train_loader"] is not None:
            train.load_state_dict(state["train_loader"])
        self.epoch = state["epoch"]
        self.steps = state["steps"]
        if self._schedule is not None and sched is None:
            for _ in range(self.steps):  # a fresh plain iterator, fast-forwarded to the step
                self._next_lr()
        self.lr = float(state["lr"])
        self.history = [dict(r) for r in state["history"]]
        self.best = state["best"]
        if self._log is not None:
            self._log.restore(self.history)
