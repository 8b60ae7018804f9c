"""AdaGrad, as in ``torch.optim.Adagrad``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class AdaGrad(Optimizer):
    """AdaGrad: ``s = s + g^2``; ``p = p - lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)``.

    Example:
        >>> optim = AdaGrad(lr_decay=0.0, initial_accumulator_value=0.1)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
        }
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        op = "AdaGrad"
        self.lr_decay = self._check_range(op, "lr_decay", lr_decay, 0.0, float("inf"))
        self.weight_decay = self._check_range(op, "weight_decay", weight_decay, 0.0, float("inf"))
        self.initial_accumulator_value = self._check_range(
            op, "initial_accumulator_value", initial_accumulator_value, 0.0, float("inf")
        )
        self.eps = self._check_range(op, "eps", eps, 0.0, float("inf"))

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        g = grad + param * self.weight_decay if self.weight_decay else grad
        t = int(state.get("step", 0)) + 1
        s = state.get("sum")
        if not isinstance(s, Tensor):
            s = g * g + self.initial_accumulator_value
        else:
            s = s + g * g
        clr = lr / (1.0 + (t - 1) * self.lr_decay)
        return param - g / (s.sqrt() + self.eps) * clr, {"step": t, "sum": s}
