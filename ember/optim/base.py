"""The optimizer base class: loops over parameters, keeps state per ``ParamId``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core.tensor import Tensor
from ..dtype import int64
from ..errors import DTypeError, ShapeError
from ..nn.param import ParamId
from . import groups as _groups
from .clipping import GradientClipping
from .grads import GradientsParams

if TYPE_CHECKING:
    from ..nn.module import Module

State = dict[str, Tensor | int]


class Optimizer:
    """Applies a per-parameter update rule; subclasses write ``update`` as one tensor expression.

    ``step(lr, module, grads)`` updates every parameter that has a gradient in ``grads`` (which
    it consumes), keeps each parameter's state on that parameter's device, and puts the result
    back in the module as a fresh require-grad leaf with the same ``ParamId``. Updates run on
    plain tensors with Tensor ops, so they work on every backend.

    Parameter groups (API.md): ``groups`` is a list of dicts
    ``{"params": [param, ...], "lr": ..., "lr_scale": ..., <any constructor option>: ...}``;
    each group's parameters are updated with the constructor's options overridden by the
    group's. Parameters in no group use the constructor's options. ``step(lr, ...)`` with a
    number uses ``lr * lr_scale`` in every group (``lr_scale`` defaults to 1); with ``None``
    each group's ``lr``, else the constructor's ``lr`` times ``lr_scale``.

    Args:
        groups: Optional parameter groups (a plain list of Params is one group of them).
        lr: The default learning rate, used by ``step(None, ...)``.
        grad_clipping: Optional ``GradientClipping`` applied to all gradients before the update.
        options: The subclass's constructor options (keyword -> value), which groups override.

    Example:
        >>> optim = em.optim.AdamW(
        ...     [{"params": [model.l1.bias], "weight_decay": 0.0, "lr_scale": 0.1}], lr=1e-3
        ... )
        >>> model = optim.step(None, model, grads)   # 1e-3 everywhere, l1.bias without decay
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        grad_clipping: GradientClipping | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.grad_clipping = grad_clipping
        self.lr = None if lr is None else _groups._rate(type(self).__name__, "lr", lr)
        self._state: dict[ParamId, State] = {}
        # parameters whose state tensors were handed out (state_of, state_dict) or came in
        # (load_state_dict): someone else may hold them, so their next update must not write
        # into them. Every other state tensor is the optimizer's alone.
        self._shared: set[ParamId] = set()
        # the constructor's options (subclasses pass them), which a group may override
        self._options: dict[str, Any] = dict(options or {})
        self._default = _groups._Group(self, None)
        self._groups: list[_groups._Group] = []
        self._group_of: dict[ParamId, _groups._Group] = {}
        if groups is not None:
            self._groups = _groups.build_groups(self, groups, self.lr, self._options)
            self._group_of = {pid: g for g in self._groups for pid in g.ids}

    def update(self, lr: float, param: Tensor, grad: Tensor, state: State) -> tuple[Tensor, State]:
        """New value and state of one parameter (plain tensors in, plain tensors out)."""
        raise NotImplementedError(f"{type(self).__name__}.update: subclasses define the rule.")

    @staticmethod
    def _check_range(
        op: str, name: str, value: float, low: float, high: float, *, open_high: bool = False
    ) -> float:
        """``value`` as a float in [low, high] (or [low, high) with ``open_high``); else
        ``ShapeError``, as PyTorch's optimizer checks."""
        v = float(value)
        if not (low <= v < high if open_high else low <= v <= high):
            bounded = high != float("inf")
            upper = "<" if open_high else "<="
            want = f"{low:g} <= {name} {upper} {high:g}" if bounded else f"{name} >= {low:g}"
            raise ShapeError(f"{op}: expected {want}, got {value!r}.")
        return v

    def update_many(
        self,
        lr: float,
        params: list[Tensor],
        grads: list[Tensor],
        states: list[State],
        *,
        owned: bool = False,
    ) -> list[tuple[Tensor, State]] | None:
        """``update`` of all parameters of one device in one go, for optimizers with a
        multi-tensor kernel; ``None`` (the default) means one ``update`` per parameter.

        ``owned``: no one but the optimizer holds the tensors in ``states``, so the update may
        write the new state into them (no copy); the parameters themselves are never written.
        """
        return None

    def step(self, lr: float | None, module: Module, grads: GradientsParams) -> Module:
        """Update ``module``'s parameters in place from ``grads`` and return the module.

        ``lr``: a number for every group (times its ``lr_scale``), or ``None`` for each group's
        own ``lr`` (else the constructor's)."""
        if not isinstance(grads, GradientsParams):
            raise DTypeError(
                f"step: expected GradientsParams, got {type(grads).__name__}. Convert with "
                "em.optim.GradientsParams.from_grads(loss.backward(), module)."
            )
        if self.grad_clipping is not None:
            grads = self.grad_clipping.apply(grads)
        # a 0-d tensor learning rate stays on the device (em.capture passes one)
        rate = None if lr is None else lr if isinstance(lr, Tensor) else float(lr)
        states = self._state
        group_of, default = self._group_of, self._default
        # parameters bucketed per group and device, so a multi-tensor kernel sees all of a
        # group's parameters on one device at once (one bucket per device without groups)
        buckets: dict[object, list[Any]] = {}
        for p in module.parameters():
            g = grads.remove(p.id)
            if g is None:
                continue
            x = p._value.without_autodiff()
            if g._hardware is not x._hardware:
                g = g.to_device(x._hardware)
            state = states.get(p.id)
            if state is None:
                state = {}
            elif _off_device(state, x):
                state = _move(state, x)
            key: object = (group_of.get(p.id, default), x._hardware) if group_of else x._hardware
            buckets.setdefault(key, []).append((p, x, g, state))
        shared = self._shared
        for where, bucket in buckets.items():
            group = where[0] if group_of else default  # type: ignore[index]
            index = self._groups.index(group) if group is not default else -1
            rule = group.rule
            bucket_lr = group.rate(rate, self.lr, type(self).__name__, index)
            owned = not any(i[0].id in shared for i in bucket)
            many = rule.update_many(
                bucket_lr,
                [i[1] for i in bucket],
                [i[2] for i in bucket],
                [i[3] for i in bucket],
                owned=owned,
            )
            for j, (p, x, g, state) in enumerate(bucket):
                bucket[j] = None  # the old value and gradient can go once this one is updated
                new, states[p.id] = (
                    many[j] if many is not None else rule.update(bucket_lr, x, g, state)
                )
                shared.discard(p.id)  # the new state is the optimizer's own
                p._replace(new)  # back in, with the parameter's autodiff context
        return module

    # ------------------------------------------------------------------ state records
    def state_dict(self, module: Module) -> dict[str, Tensor]:
        """``module``'s parameter state as ``"<param name>/<key>" -> tensor`` (ints: int64)."""
        out: dict[str, Tensor] = {}
        for name, p in module.named_parameters():
            if p.id in self._state:
                self._shared.add(p.id)
            for key, v in self._state.get(p.id, {}).items():
                if isinstance(v, Tensor):
                    out[f"{name}/{key}"] = v
                else:
                    out[f"{name}/{key}"] = Tensor.from_data(v, dtype=int64)
        return out

    def load_state_dict(self, state: Mapping[str, Tensor], module: Module) -> None:
        """Restore state written by ``state_dict``; tensors go to each parameter's device.

        Everything is checked before anything changes (see ``_checked_state``).
        """
        params = dict(module.named_parameters())
        checked = self._checked_state(state, module)
        self._install_state({params[name].id: s for name, s in checked.items()})

    def _checked_state(
        self, state: Mapping[str, Tensor | np.ndarray], module: Module
    ) -> dict[str, State]:
        """``state`` (``state_dict`` keys) as parameter name -> state, on each parameter's device;
        changes nothing. ``RecordError`` listing every key that names no parameter, every tensor
        whose shape or dtype differs from its parameter's, and every integer counter that is
        not a non-negative scalar."""
        from ..record.errors import RecordError

        params = dict(module.named_parameters())
        loaded: dict[str, State] = {}
        unknown, bad = [], []
        for key, v in state.items():
            name, _, field = key.rpartition("/")
            p = params.get(name)
            if p is None or not field:
                unknown.append(key)
                continue
            t = v if isinstance(v, Tensor) else Tensor.from_data(np.asarray(v))
            entry = loaded.setdefault(name, {})
            if t.dtype.is_int and t.ndim == 0:
                count = int(t.item())
                if count < 0:
                    bad.append(f"{key}: expected a count >= 0, got {count}")
                entry[field] = count
            elif t.shape != p.shape or t.dtype is not p.dtype:
                bad.append(
                    f"{key}: expected {p.dtype.name} {p.shape} (the parameter's), got "
                    f"{t.dtype.name} {t.shape}"
                )
            else:
                entry[field] = t.without_autodiff().to_device(p.val().device.without_autodiff())
        if unknown:
            raise RecordError(
                f"load_state_dict: optimizer state names no parameter of "
                f"{type(module).__name__}: {unknown}. Load it into the model it was saved with."
            )
        if bad:
            raise RecordError(
                f"load_state_dict: optimizer state does not fit {type(module).__name__}'s "
                f"parameters: {'; '.join(bad)}. The record is damaged or from another model."
            )
        return loaded

    def _install_state(self, loaded: dict[ParamId, State]) -> None:
        """Adopt state checked by ``_checked_state``, keyed by parameter id."""
        self._state.update(loaded)
        self._shared.update(loaded)  # the caller's tensors: never written in place

    def state_of(self, param_id: ParamId) -> State | None:
        """The state kept for one parameter (``None`` before its first step).

        Its tensors are values: later steps never change them (the next update copies).
        """
        state = self._state.get(param_id)
        if state is not None:
            self._shared.add(param_id)
        return state


def _off_device(state: State, x: Tensor) -> bool:
    for v in state.values():
        if isinstance(v, Tensor):
            return v._hardware is not x._hardware
    return False


def _move(state: State, x: Tensor) -> State:
    return {k: v.to_device(x._hardware) if isinstance(v, Tensor) else v for k, v in state.items()}
