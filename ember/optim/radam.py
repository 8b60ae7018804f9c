"""RAdam (rectified Adam), as in ``torch.optim.RAdam``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class RAdam(Optimizer):
    """RAdam: Adam's moments; while the variance estimate is unreliable (``rho_t <= 5``) a plain
    momentum step ``p = p - lr m / (1 - b1^t)``, after that Adam's step times the rectification
    ``r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))``, with
    ``rho_inf = 2 / (1 - b2) - 1`` and ``rho_t = rho_inf - 2 t b2^t / (1 - b2^t)``.

    Weight decay is added to the gradient (L2), or with ``decoupled_weight_decay`` applied as
    ``p (1 - lr wd)`` first. PyTorch's default rate is ``lr=1e-3``. State per parameter:
    ``step``, ``exp_avg``, ``exp_avg_sq``.

    Example:
        >>> optim = RAdam(lr=1e-3, decoupled_weight_decay=True, weight_decay=0.01)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        op = "RAdam"
        self.beta1 = self._check_range(op, "betas[0]", betas[0], 0.0, 1.0, open_high=True)
        self.beta2 = self._check_range(op, "betas[1]", betas[1], 0.0, 1.0, open_high=True)
        self.eps = self._check_range(op, "eps", eps, 0.0, float("inf"))
        self.weight_decay = self._check_range(op, "weight_decay", weight_decay, 0.0, float("inf"))
        self.decoupled_weight_decay = bool(decoupled_weight_decay)

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        b1, b2, wd = self.beta1, self.beta2, self.weight_decay
        if wd and self.decoupled_weight_decay:
            param = param * (1.0 - lr * wd)
        elif wd:
            grad = grad + param * wd
        t = int(state.get("step", 0)) + 1
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        m = grad * (1.0 - b1) if not isinstance(m, Tensor) else m + (grad - m) * (1.0 - b1)
        g2 = grad * grad * (1.0 - b2)
        v = g2 if not isinstance(v, Tensor) else v * b2 + g2
        new_state: State = {"step": t, "exp_avg": m, "exp_avg_sq": v}
        bc1, bc2 = 1.0 - b1**t, 1.0 - b2**t
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * t * b2**t / bc2
        if rho_t <= 5.0:
            return param - m * (lr / bc1), new_state
        rect = math.sqrt(
            (rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)
        )
        return param - m / (v.sqrt() + self.eps) * (lr / bc1 * rect * math.sqrt(bc2)), new_state
