"""The ``Learner``'s mixed precision: fp32, bf16 (autocast) or fp16 (autocast + loss scaling)."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from .. import amp
from .._core.tensor import Tensor
from ..dtype import bfloat16, float16
from ..errors import DTypeError

PRECISIONS = ("fp32", "bf16", "fp16")


class Precision:
    """Runs forward passes under ``amp.autocast`` and, for fp16, scales losses and steps through
    an ``amp.GradScaler``; fp32 adds nothing to a step.

    With several devices the same object is handed to the replicas and DDP ranks
    (``em.distributed``): each worker thread enters ``autocast()`` itself (the policy is
    per thread) and scales its own loss with ``scale``; the parameters stay float32, so the
    gradients that are summed or all-reduced are float32, and one scaler steps the model.
    """

    def __init__(self, name: str) -> None:
        if name not in PRECISIONS:
            raise DTypeError(
                f"Learner: expected precision 'fp32', 'bf16' or 'fp16', got {name!r}. fp16 "
                "trains with loss scaling; bf16 needs none."
            )
        self.name = name
        self.dtype = {"bf16": bfloat16, "fp16": float16}.get(name)
        self.scaler = amp.GradScaler() if name == "fp16" else None

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """``amp.autocast(dtype)`` for bf16/fp16; a no-op context for fp32."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return amp.autocast(self.dtype)

    def scale(self, loss: Tensor) -> Tensor:
        """The loss to run backward from (scaled for fp16)."""
        return loss if self.scaler is None else self.scaler.scale(loss)

    def step(self, optimizer: Any, lr: float, model: Any, grads: Any) -> Any:
        """``optimizer.step`` (fp16: unscaled first, skipped when a gradient overflowed)."""
        if self.scaler is None:
            return optimizer.step(lr, model, grads)
        return self.scaler.step(optimizer, lr, model, grads)

    def state_dict(self) -> dict[str, float | int]:
        """The loss scaler's state (fp16), saved in the Learner's records."""
        s = self.scaler
        if s is None:
            return {}
        return {"scale": s.scale_value, "clean_steps": s._clean_steps}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore ``state_dict()``'s values; ``None`` (a record of an fp32/bf16 run) keeps them."""
        s = self.scaler
        if s is None or state is None:
            return
        scale, clean = state.get("scale"), state.get("clean_steps")
        if not (
            isinstance(scale, (int, float))
            and math.isfinite(scale)
            and scale > 0
            and isinstance(clean, int)
            and clean >= 0
        ):
            raise ValueError(f"grad_scaler state {state!r} is not a positive scale and a count")
        s.scale_value, s._clean_steps = float(scale), clean
