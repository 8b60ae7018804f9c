"""``NonFiniteError``: training diverged (a loss or a weight became NaN or infinite)."""

from __future__ import annotations

from ..errors import EmberError


class NonFiniteError(EmberError, ArithmeticError):
    """A training loss, validation loss or parameter became NaN or infinite.

    Raised by ``Learner.fit`` unless ``allow_nonfinite=True``; nothing diverged is saved (the
    newest record is the last good state and resumes as usual).

    Attributes:
        summary: What happened and where, e.g. "the training loss became non-finite (nan) at
            epoch 1 step 3 (batch 3 of 45)"; the message is the op, this, and a hint.
        metric: What became non-finite: "train_loss", "valid_loss" or "parameter <name>".
        value: The offending value (nan, inf or -inf).
        epoch: The 1-based epoch in which it happened.
        step: The 1-based optimizer step: the one the batch belongs to for a training loss, the
            last one taken for a validation loss or a parameter.
    """

    def __init__(
        self, op: str, summary: str, hint: str, *, metric: str, value: float, epoch: int, step: int
    ) -> None:
        super().__init__(f"{op}: {summary}; {hint}")
        self.summary = summary
        self.metric = metric
        self.value = value
        self.epoch = epoch
        self.step = step
