"""Adam and AdamW."""

from __future__ import annotations

import math

from ..tensor.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class Adam(Optimizer):
    """Adam as in ``torch.optim.Adam`` (weight decay added to the gradient, L2 style).

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Example:
        >>> optim = Adam(betas=(0.9, 0.999), weight_decay=0.0)
    """

    decoupled = False

    def __init__(
        self,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        super().__init__(grad_clipping=grad_clipping)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        b1, b2, wd = self.beta1, self.beta2, self.weight_decay
        if wd and self.decoupled:
            param = param * (1.0 - lr * wd)
        elif wd:
            grad = grad + param * wd
        t = int(state.get("step", 0)) + 1
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        m = grad * (1.0 - b1) if not isinstance(m, Tensor) else m * b1 + grad * (1.0 - b1)
        g2 = grad * grad
        v = g2 * (1.0 - b2) if not isinstance(v, Tensor) else v * b2 + g2 * (1.0 - b2)
        denom = v.sqrt() * (1.0 / math.sqrt(1.0 - b2**t)) + self.eps
        new = param - m / denom * (lr / (1.0 - b1**t))
        return new, {"step": t, "exp_avg": m, "exp_avg_sq": v}


class AdamW(Adam):
    """Adam with decoupled weight decay, as in ``torch.optim.AdamW``: ``p = p (1 - lr wd)`` first.

    Example:
        >>> optim = AdamW(weight_decay=0.01)
    """

    decoupled = True

    def __init__(
        self,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        *,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        super().__init__(betas, eps, weight_decay, grad_clipping=grad_clipping)
