"""Training metrics: each one accumulates over the steps of an epoch and reports one number."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import ShapeError


@dataclass
class StepOutput:
    """What one step hands to the metrics.

    Attributes:
        loss: Mean loss of the batch.
        batch_size: Number of examples B in the batch (the weight of ``loss``).
        logits: Scores as a NumPy array (N, K), or None when no metric needs them.
        targets: Integer labels (N,) matching ``logits``, or None.
        lr: Learning rate used by the step (None in evaluation).
    """

    loss: float
    batch_size: int
    logits: np.ndarray | None = None
    targets: np.ndarray | None = None
    lr: float | None = None


class Metric(Protocol):
    """A metric: ``update`` per step, ``compute`` at any time, ``reset`` per epoch."""

    name: str
    needs_logits: bool

    def update(self, out: StepOutput) -> None: ...

    def compute(self) -> float: ...

    def reset(self) -> None: ...


class Loss:
    """Mean loss over the examples seen (weighted by batch size)."""

    name = "loss"
    needs_logits = False

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.count = 0

    def update(self, out: StepOutput) -> None:
        self.total += out.loss * out.batch_size
        self.count += out.batch_size

    def compute(self) -> float:
        return self.total / self.count if self.count else math.nan


class Perplexity(Loss):
    """``exp`` of the mean cross-entropy loss (for language models)."""

    name = "perplexity"

    def compute(self) -> float:
        mean = super().compute()
        return math.exp(min(mean, 700.0)) if not math.isnan(mean) else math.nan


def _flat(out: StepOutput, op: str) -> tuple[np.ndarray, np.ndarray]:
    if out.logits is None or out.targets is None:
        raise ShapeError(f"{op}: the step gave no logits/targets; return them from the loss step.")
    logits = out.logits.reshape(-1, out.logits.shape[-1])
    targets = out.targets.reshape(-1)
    if logits.shape[0] != targets.shape[0]:
        raise ShapeError(
            f"{op}: expected one target per row of logits, got logits {out.logits.shape} and "
            f"targets {out.targets.shape}."
        )
    return logits, targets


class TopKAccuracy:
    """Fraction of examples whose label is among the ``k`` highest scores."""

    needs_logits = True

    def __init__(self, k: int = 5) -> None:
        if k < 1:
            raise ShapeError(f"TopKAccuracy: expected k >= 1, got {k}.")
        self.k = k
        self.name = "accuracy" if k == 1 else f"top{k}_accuracy"
        self.reset()

    def reset(self) -> None:
        self.correct = 0
        self.count = 0

    def update(self, out: StepOutput) -> None:
        logits, targets = _flat(out, self.name)
        if self.k == 1:
            hit = logits.argmax(axis=-1) == targets
        else:
            k = min(self.k, logits.shape[-1])
            top = np.argpartition(-logits, k - 1, axis=-1)[:, :k]
            hit = (top == targets[:, None]).any(axis=-1)
        self.correct += int(hit.sum())
        self.count += int(targets.shape[0])

    def compute(self) -> float:
        return self.correct / self.count if self.count else math.nan


class Accuracy(TopKAccuracy):
    """Fraction of examples whose highest score is the label (top-1 accuracy)."""

    def __init__(self) -> None:
        super().__init__(1)


class LearningRate:
    """The learning rate of the last step."""

    name = "lr"
    needs_logits = False

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.value = math.nan

    def update(self, out: StepOutput) -> None:
        if out.lr is not None:
            self.value = out.lr

    def compute(self) -> float:
        return self.value


def default_metrics(*, classification: bool = True, language_model: bool = False) -> list[Metric]:
    """Loss, plus accuracy and top-5 accuracy for classifiers, perplexity for language models."""
    ms: list[Metric] = [Loss()]
    if classification:
        ms += [Accuracy(), TopKAccuracy(5)]
    if language_model:
        ms.append(Perplexity())
    return ms
