"""``Learner(..., capture=True)``: the training step through ``em.capture``.

Without gradient accumulation one captured function runs the whole step (forward under the
precision policy, backward, ``GradientsParams``, the optimizer's clipping and update): on CUDA
one graph replay per batch. With accumulation the micro-step (forward and backward, returning
the gradients) and the update are captured separately and the gradients are summed between
them. The loss and, when the metrics need them, the logits and targets are returned and read
after the call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._capture import capture
from .._core.tensor import Tensor
from ..optim.grads import GradientsParams


class CapturedSteps:
    """The captured functions of one ``Learner``."""

    def __init__(self, loss_fn: Callable[..., Any], precision: Any) -> None:
        self._loss_fn = loss_fn
        self._amp = precision
        self.whole = capture(self._whole)
        self.micro = capture(self._micro)
        self.apply = capture(self._apply)

    def _forward(self, model: Any, batch: Sequence[Tensor], needs_logits: bool) -> Any:
        with self._amp.autocast():
            loss, logits, targets = self._loss_fn(model, batch)
        return loss, (logits if needs_logits else None), (targets if needs_logits else None)

    def _whole(
        self, model: Any, optimizer: Any, batch: tuple[Tensor, ...], lr: float, needs_logits: bool
    ) -> tuple[Any, Any, Any]:
        loss, logits, targets = self._forward(model, batch, needs_logits)
        grads = GradientsParams.from_grads(loss.backward(), model)
        self._amp.step(optimizer, lr, model, grads)
        return loss, logits, targets

    def _micro(
        self, model: Any, batch: tuple[Tensor, ...], scale: float, needs_logits: bool
    ) -> tuple[Any, Any, Any, GradientsParams]:
        loss, logits, targets = self._forward(model, batch, needs_logits)
        grads = GradientsParams.from_grads((loss * scale).backward(), model)
        return loss, logits, targets, grads

    def _apply(self, model: Any, optimizer: Any, grads: GradientsParams, lr: float) -> None:
        self._amp.step(optimizer, lr, model, grads)
