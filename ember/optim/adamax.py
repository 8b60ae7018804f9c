"""Adamax (Adam with an infinity norm), as in ``torch.optim.Adamax``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class Adamax(Optimizer):
    """Adamax: ``m = b1 m + (1 - b1) g``, ``u = max(b2 u, |g| + eps)``,
    ``p = p - lr / (1 - b1^t) * m / u`` (``g`` with L2 weight decay added).

    PyTorch's default rate is ``lr=2e-3``. State per parameter: ``step``, ``exp_avg``,
    ``exp_inf``.

    Example:
        >>> optim = Adamax(lr=2e-3, betas=(0.9, 0.999))
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {"betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        op = "Adamax"
        self.beta1 = self._check_range(op, "betas[0]", betas[0], 0.0, 1.0, open_high=True)
        self.beta2 = self._check_range(op, "betas[1]", betas[1], 0.0, 1.0, open_high=True)
        self.eps = self._check_range(op, "eps", eps, 0.0, float("inf"))
        self.weight_decay = self._check_range(op, "weight_decay", weight_decay, 0.0, float("inf"))

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        b1, b2 = self.beta1, self.beta2
        g = grad + param * self.weight_decay if self.weight_decay else grad
        t = int(state.get("step", 0)) + 1
        m, u = state.get("exp_avg"), state.get("exp_inf")
        m = g * (1.0 - b1) if not isinstance(m, Tensor) else m + (g - m) * (1.0 - b1)
        a = g.abs() + self.eps
        if isinstance(u, Tensor):
            decayed = u * b2
            u = a.mask_where(decayed > a, decayed)  # the elementwise max of the two
        else:
            u = a  # max(b2 * 0, |g| + eps)
        new = param - m / u * (lr / (1.0 - b1**t))
        return new, {"step": t, "exp_avg": m, "exp_inf": u}
