"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from ..errors import ShapeError
from .base import Optimizer, State
from .clipping import GradientClipping


class SGD(Optimizer):
    """SGD as in ``torch.optim.SGD``.

    ``g = grad + weight_decay * p``; with momentum ``b = momentum * b + (1 - dampening) * g``
    (``b = g`` on the first step), then ``g = g + momentum * b`` (Nesterov) or ``g = b``;
    ``p = p - lr * g``.

    Example:
        >>> optim = SGD(momentum=0.9, nesterov=True)
        >>> model = optim.step(0.1, model, grads)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {
            "momentum": momentum,
            "nesterov": nesterov,
            "weight_decay": weight_decay,
            "dampening": dampening,
        }
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ShapeError(
                f"SGD: Nesterov momentum needs momentum > 0 and dampening 0, got momentum "
                f"{momentum} and dampening {dampening}."
            )
        self.momentum = self._check_range("SGD", "momentum", momentum, 0.0, float("inf"))
        self.nesterov = bool(nesterov)
        self.weight_decay = self._check_range(
            "SGD", "weight_decay", weight_decay, 0.0, float("inf")
        )
        self.dampening = float(dampening)

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        g = grad + param * self.weight_decay if self.weight_decay else grad
        mu = self.momentum
        if not mu:
            return param - g * lr, state
        buf = state.get("momentum")
        buf = g if not isinstance(buf, Tensor) else buf * mu + g * (1.0 - self.dampening)
        step = g + buf * mu if self.nesterov else buf
        return param - step * lr, {"momentum": buf}
