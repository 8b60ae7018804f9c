"""RMSProp, as in ``torch.optim.RMSprop``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class RMSProp(Optimizer):
    """RMSProp: ``v = alpha v + (1 - alpha) g^2``; ``p = p - lr g / (sqrt(v) + eps)``.

    ``centered`` subtracts the squared running mean of ``g`` from ``v``; ``momentum`` keeps a
    buffer ``b = momentum b + g / (sqrt(v) + eps)`` and steps by ``lr b``.

    Example:
        >>> optim = RMSProp(alpha=0.99, momentum=0.9)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
        }
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        self.alpha = self._check_range("RMSProp", "alpha", alpha, 0.0, 1.0)
        self.eps = self._check_range("RMSProp", "eps", eps, 0.0, float("inf"))
        self.weight_decay = self._check_range(
            "RMSProp", "weight_decay", weight_decay, 0.0, float("inf")
        )
        self.momentum = self._check_range("RMSProp", "momentum", momentum, 0.0, float("inf"))
        self.centered = bool(centered)

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        a = self.alpha
        g = grad + param * self.weight_decay if self.weight_decay else grad
        v = state.get("square_avg")
        g2 = g * g * (1.0 - a)
        v = g2 if not isinstance(v, Tensor) else v * a + g2
        new_state: State = {"square_avg": v}
        if self.centered:
            m = state.get("grad_avg")
            m = g * (1.0 - a) if not isinstance(m, Tensor) else m * a + g * (1.0 - a)
            new_state["grad_avg"] = m
            denom = (v - m * m).sqrt() + self.eps
        else:
            denom = v.sqrt() + self.eps
        if self.momentum:
            buf = state.get("momentum_buffer")
            buf = g / denom if not isinstance(buf, Tensor) else buf * self.momentum + g / denom
            new_state["momentum_buffer"] = buf
            return param - buf * lr, new_state
        return param - g / denom * lr, new_state
