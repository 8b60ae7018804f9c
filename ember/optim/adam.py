"""Adam and AdamW."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._core.internal import from_raw
from .._core.tensor import Tensor
from ..dtype import float32, float64, int64
from .base import Optimizer, State
from .clipping import GradientClipping


class Adam(Optimizer):
    """Adam as in ``torch.optim.Adam`` (weight decay added to the gradient, L2 style).

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Example:
        >>> optim = Adam(betas=(0.9, 0.999), weight_decay=0.0)
        >>> optim = Adam([{"params": [model.l1.weight], "betas": (0.8, 0.99)}], lr=1e-3)
    """

    decoupled = False

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
        op = type(self).__name__
        self.beta1 = self._check_range(op, "betas[0]", betas[0], 0.0, 1.0, open_high=True)
        self.beta2 = self._check_range(op, "betas[1]", betas[1], 0.0, 1.0, open_high=True)
        self.eps = self._check_range(op, "eps", eps, 0.0, float("inf"))
        self.weight_decay = self._check_range(op, "weight_decay", weight_decay, 0.0, float("inf"))

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        if isinstance(lr, Tensor) or isinstance(state.get("step"), Tensor):
            return self._update_on_device(lr, param, grad, state)
        b1, b2, wd = self.beta1, self.beta2, self.weight_decay
        if wd and self.decoupled:
            param = param * (1.0 - lr * wd)
        elif wd:
            grad = grad + param * wd
        t = int(state.get("step", 0)) + 1
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        # moving averages as lerps (m + (g - m)(1 - b1)): fewer scalar ops than b1 m + (1 - b1) g
        m = grad * (1.0 - b1) if not isinstance(m, Tensor) else m + (grad - m) * (1.0 - b1)
        g2 = grad * grad
        v = g2 * (1.0 - b2) if not isinstance(v, Tensor) else v + (g2 - v) * (1.0 - b2)
        # m_hat / (sqrt(v_hat) + eps) with both bias corrections folded into two scalars
        root_bc2 = math.sqrt(1.0 - b2**t)
        new = param - m / (v.sqrt() + self.eps * root_bc2) * (lr * root_bc2 / (1.0 - b1**t))
        return new, {"step": t, "exp_avg": m, "exp_avg_sq": v}

    def _update_on_device(
        self, lr: float | Tensor, param: Tensor, grad: Tensor, state: State
    ) -> tuple[Tensor, State]:
        """``update`` with the learning rate and the step count as 0-d device tensors (inside
        ``em.capture``: a replay reads them from the device, nothing is fixed at recording)."""
        b1, b2, wd = self.beta1, self.beta2, self.weight_decay
        step = state.get("step", 0)
        if not isinstance(step, Tensor):
            step = Tensor.full((), int(step), dtype=int64, device=param._hardware)
        t = step + 1
        tf = t.cast(param.dtype if param.dtype is float64 else float32)
        if wd and self.decoupled:
            param = param * (1.0 - lr * wd)
        elif wd:
            grad = grad + param * wd
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        m = grad * (1.0 - b1) if not isinstance(m, Tensor) else m + (grad - m) * (1.0 - b1)
        g2 = grad * grad
        v = g2 * (1.0 - b2) if not isinstance(v, Tensor) else v + (g2 - v) * (1.0 - b2)
        root_bc2 = (1.0 - b2**tf).sqrt()
        new = param - m / (v.sqrt() + root_bc2 * self.eps) * (lr * root_bc2 / (1.0 - b1**tf))
        return new, {"step": t, "exp_avg": m, "exp_avg_sq": v}

    def _update_many_on_device(
        self,
        lr: float | Tensor,
        params: list[Tensor],
        grads: list[Tensor],
        states: list[State],
        owned: bool,
    ) -> list[tuple[Tensor, State]] | None:
        """``update_many`` with the rate and the step count as device tensors (em.capture): one
        fused kernel on the torch backend when every parameter shares one step-count tensor
        (``em.capture`` makes equal counts one tensor) and one dtype with its gradient;
        otherwise ``None`` (``update`` per parameter, written with tensor ops)."""
        step = states[0].get("step")
        dev = params[0]._hardware
        dt = params[0].dtype
        if (
            dev.b.name != "torch"
            or not isinstance(step, Tensor)
            or any(st.get("step") is not step or "exp_avg" not in st for st in states)
            or any(p.dtype is not dt for p in params)
            or any(g.dtype is not dt for g in grads)
        ):
            return None
        t = step + 1
        new, m, v = dev.b.adam_many(
            [x._raw for x in params],
            [g._raw for g in grads],
            [st["exp_avg"]._raw for st in states],  # type: ignore[union-attr]
            [st["exp_avg_sq"]._raw for st in states],  # type: ignore[union-attr]
            t._raw,
            lr._raw if isinstance(lr, Tensor) else lr,
            self.beta1,
            self.beta2,
            self.eps,
            self.weight_decay,
            self.decoupled,
            owned,
        )
        return [
            (
                from_raw(p, dev),
                {"step": t, "exp_avg": from_raw(a, dev), "exp_avg_sq": from_raw(b, dev)},
            )
            for p, a, b in zip(new, m, v)
        ]

    def update_many(
        self,
        lr: float,
        params: list[Tensor],
        grads: list[Tensor],
        states: list[State],
        *,
        owned: bool = False,
    ) -> list[tuple[Tensor, State]] | None:
        """All parameters in one ``adam_many`` call (one multi-tensor kernel on torch).

        With ``owned`` the moments are updated in their own buffers (no copy of them)."""
        if not params:
            return None
        if isinstance(lr, Tensor) or any(isinstance(st.get("step"), Tensor) for st in states):
            return self._update_many_on_device(lr, params, grads, states, owned)
        steps = {int(st.get("step", 0)) for st in states}
        fresh = all("exp_avg" not in st for st in states)
        kept = all(isinstance(st.get("exp_avg"), Tensor) for st in states)
        if len(steps) != 1 or not (fresh or kept):
            return None
        t = steps.pop() + 1
        ms = None if fresh else [st["exp_avg"]._raw for st in states]  # type: ignore[union-attr]
        vs = None if fresh else [st["exp_avg_sq"]._raw for st in states]  # type: ignore[union-attr]
        dev = params[0]._hardware
        new, m, v = dev.b.adam_many(
            [x._raw for x in params],
            [g._raw for g in grads],
            ms,
            vs,
            t,
            lr,
            self.beta1,
            self.beta2,
            self.eps,
            self.weight_decay,
            self.decoupled,
            owned,
        )
        out = []
        for p_new, m_new, v_new in zip(new, m, v):
            state: State = {
                "step": t,
                "exp_avg": from_raw(m_new, dev),
                "exp_avg_sq": from_raw(v_new, dev),
            }
            out.append((from_raw(p_new, dev), state))
        return out


class AdamW(Adam):
    """Adam with decoupled weight decay, as in ``torch.optim.AdamW``: ``p = p (1 - lr wd)`` first.

    Example:
        >>> optim = AdamW(weight_decay=0.01)
    """

    decoupled = True

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        super().__init__(
            groups,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            grad_clipping=grad_clipping,
        )
