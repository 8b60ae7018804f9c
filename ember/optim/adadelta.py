"""Adadelta, as in ``torch.optim.Adadelta``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core.tensor import Tensor
from .base import Optimizer, State
from .clipping import GradientClipping


class Adadelta(Optimizer):
    """Adadelta: ``v = rho v + (1 - rho) g^2``, ``d = sqrt(u + eps) / sqrt(v + eps) * g``,
    ``u = rho u + (1 - rho) d^2``, ``p = p - lr d`` (``g`` with L2 weight decay added).

    PyTorch's default rate is ``lr=1.0``; the rate comes from ``step`` or ``lr=`` as for every
    optimizer. State per parameter: ``step``, ``square_avg``, ``acc_delta``.

    Example:
        >>> optim = Adadelta(lr=1.0, rho=0.9)
        >>> model = optim.step(None, model, grads)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        options = {"rho": rho, "eps": eps, "weight_decay": weight_decay}
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping, options=options)
        op = "Adadelta"
        self.rho = self._check_range(op, "rho", rho, 0.0, 1.0)
        self.eps = self._check_range(op, "eps", eps, 0.0, float("inf"))
        self.weight_decay = self._check_range(op, "weight_decay", weight_decay, 0.0, float("inf"))

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        rho, eps = self.rho, self.eps
        g = grad + param * self.weight_decay if self.weight_decay else grad
        t = int(state.get("step", 0)) + 1
        v, u = state.get("square_avg"), state.get("acc_delta")
        g2 = g * g * (1.0 - rho)
        v = g2 if not isinstance(v, Tensor) else v * rho + g2
        # the first step's accumulated delta is zero: sqrt(0 + eps)
        scale = (u + eps).sqrt() if isinstance(u, Tensor) else eps**0.5
        delta = g * scale / (v + eps).sqrt()
        d2 = delta * delta * (1.0 - rho)
        u = d2 if not isinstance(u, Tensor) else u * rho + d2
        return param - delta * lr, {"step": t, "square_avg": v, "acc_delta": u}
