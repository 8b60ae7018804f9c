"""NAdam (Adam with Nesterov momentum), as in ``torch.optim.NAdam``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class NAdam(Optimizer):
    """NAdam with PyTorch's momentum schedule ``mu_t = b1 (1 - 0.96^(t psi) / 2)``
    (``psi = momentum_decay``):

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, ``d = sqrt(v / (1 - b2^t)) + eps``,
    ``p = p - lr (1 - mu_t) / (1 - prod mu_1..t) g / d - lr mu_{t+1} / (1 - prod mu_1..t+1) m / d``.

    Weight decay is added to the gradient (L2), or with ``decoupled_weight_decay`` applied as
    ``p (1 - lr wd)`` first (NAdamW). PyTorch's default rate is ``lr=2e-3``. State per
    parameter: ``step``, ``exp_avg``, ``exp_avg_sq`` (the product of the ``mu`` follows from
    ``step``).

    Example:
        >>> optim = NAdam(lr=2e-3, momentum_decay=4e-3)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        op = "NAdam"
        self.beta1 = self._check_range(op, "betas[0]", betas[0], 0.0, 1.0, open_high=True)
        self.beta2 = self._check_range(op, "betas[1]", betas[1], 0.0, 1.0, open_high=True)
        self.eps = self._check_range(op, "eps", eps, 0.0, float("inf"))
        self.weight_decay = self._check_range(op, "weight_decay", weight_decay, 0.0, float("inf"))
        self.momentum_decay = self._check_range(
            op, "momentum_decay", momentum_decay, 0.0, float("inf")
        )
        self.decoupled_weight_decay = bool(decoupled_weight_decay)
        self._products = [1.0]  # prod mu_1..t at index t, grown on demand

    def _mu(self, t: int) -> float:
        return self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.momentum_decay))

    def _product(self, t: int) -> float:
        products = self._products
        while len(products) <= t:
            products.append(products[-1] * self._mu(len(products)))
        return products[t]

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
        denom = (v * (1.0 / (1.0 - b2**t))).sqrt() + self.eps
        mu, mu_next = self._mu(t), self._mu(t + 1)
        prod = self._product(t)
        c_grad = lr * (1.0 - mu) / (1.0 - prod)
        c_avg = lr * mu_next / (1.0 - prod * mu_next)
        new = param - (grad * c_grad + m * c_avg) / denom
        return new, {"step": t, "exp_avg": m, "exp_avg_sq": v}
