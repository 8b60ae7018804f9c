"""Parameter groups: per-group optimizer options, and the no-decay recipe (``no_decay_groups``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import DTypeError, EmberError, ShapeError
from ..nn.param import Param, ParamId

if TYPE_CHECKING:
    from ..nn.module import Module
    from .base import Optimizer

# what a group may hold besides the constructor's options
_GROUP_KEYS = ("params", "lr", "lr_scale")


@dataclass(eq=False)
class _Group:
    """One group: the optimizer configured with its options (``rule``), its rates and its ids."""

    rule: Optimizer
    lr: float | None
    lr_scale: float = 1.0
    ids: frozenset[ParamId] = field(default_factory=frozenset)

    def rate(self, lr: float | None, default: float | None, op: str, index: int) -> float:
        """The rate of this group's update: ``lr * lr_scale`` for a number; for ``None`` the
        group's ``lr``, else the constructor's ``lr`` times ``lr_scale``."""
        if lr is not None:
            return lr * self.lr_scale
        if self.lr is not None:
            return self.lr
        if default is not None:
            return default * self.lr_scale
        where = "the parameters in no group" if index < 0 else f"group {index}"
        raise ShapeError(
            f"{op}.step: expected a learning rate for {where}, got lr=None with no 'lr' in the "
            f"group and none in the constructor. Pass a number to step, or lr= to {op}(...)."
        )


def _rate(op: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DTypeError(f"{op}: expected a number for {name}, got {type(value).__name__}.")
    v = float(value)
    if not v >= 0.0:
        raise ShapeError(f"{op}: expected {name} >= 0, got {value!r}.")
    return v


def _ids(op: str, index: int, params: object) -> frozenset[ParamId]:
    if isinstance(params, (Param, ParamId)) or not isinstance(params, Iterable):
        raise DTypeError(
            f"{op}: expected group {index}'s 'params' to be a list of Params, got "
            f"{type(params).__name__}. Write {{'params': [model.l1.weight, ...]}}."
        )
    out = []
    for p in params:
        if isinstance(p, Param):
            out.append(p.id)
        elif isinstance(p, ParamId):
            out.append(p)
        else:
            raise DTypeError(
                f"{op}: expected Params (or ParamIds) in group {index}'s 'params', got "
                f"{type(p).__name__}. Take them from model.parameters()."
            )
    return frozenset(out)


def _as_group_dicts(op: str, groups: object) -> list[Mapping[str, Any]]:
    """``groups`` as a list of dicts; a plain list of Params is one group of them."""
    if isinstance(groups, (Mapping, str, bytes)) or not isinstance(groups, Iterable):
        raise DTypeError(
            f"{op}: expected the first argument to be a list of parameter groups "
            f"([{{'params': [...], 'weight_decay': 0.0}}, ...]), got {type(groups).__name__}. "
            f"Pass options by keyword, e.g. {op}(lr=1e-3)."
        )
    items = list(groups)
    if items and all(isinstance(p, (Param, ParamId)) for p in items):
        return [{"params": items}]
    for i, g in enumerate(items):
        if not isinstance(g, Mapping):
            raise DTypeError(
                f"{op}: expected parameter group {i} to be a dict with 'params', got "
                f"{type(g).__name__}. Write [{{'params': [...], 'lr': 1e-3}}, ...]."
            )
    return items


def build_groups(
    optim: Optimizer, groups: object, lr: float | None, options: Mapping[str, Any]
) -> list[_Group]:
    """One ``_Group`` per entry of ``groups``; each rule is ``type(optim)`` built with the
    constructor's ``options`` overridden by the group's. Every parameter may be in one group."""
    op = type(optim).__name__
    out: list[_Group] = []
    seen: set[ParamId] = set()
    for i, g in enumerate(_as_group_dicts(op, groups)):
        if "params" not in g:
            raise DTypeError(f"{op}: parameter group {i} has no 'params': {sorted(g)}.")
        unknown = sorted(k for k in g if k not in _GROUP_KEYS and k not in options)
        if unknown:
            raise DTypeError(
                f"{op}: parameter group {i} has unknown keys {unknown}; expected 'params', 'lr', "
                f"'lr_scale' or options of {op}: {sorted(options)}."
            )
        ids = _ids(op, i, g["params"])
        twice = ids & seen
        if twice:
            raise ShapeError(
                f"{op}: expected each parameter in at most one group, got {len(twice)} "
                f"parameter(s) of group {i} already in an earlier group. Split them once."
            )
        seen |= ids
        own = {k: v for k, v in g.items() if k in options}
        rule = optim  # a group that only sets rates shares the optimizer's own rule
        if own:
            try:
                rule = type(optim)(**{**options, **own}, lr=lr)
            except EmberError as e:
                raise type(e)(f"parameter group {i}: {e}") from None
        group_lr = None if g.get("lr") is None else _rate(op, f"group {i}'s lr", g["lr"])
        scale = _rate(op, f"group {i}'s lr_scale", g.get("lr_scale", 1.0))
        out.append(_Group(rule, group_lr, scale, ids))
    return out


def _no_decay_module(m: Module) -> bool:
    from ..nn.layers.linear import Embedding

    return isinstance(m, Embedding) or "Norm" in type(m).__name__


def no_decay_groups(model: Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two parameter groups, the nanoGPT recipe: weights of ``weight_decay``, and one group
    without weight decay for biases, embeddings and normalisation weights.

    A parameter goes to the no-decay group if it belongs to an ``Embedding`` or to a module
    whose class name contains ``Norm`` (LayerNorm, RmsNorm, BatchNorm*, GroupNorm, ...), or if
    it has fewer than 2 dimensions (biases, scales). Everything else decays. A parameter shared
    by two modules is placed once (its first name).

    Example:
        >>> optim = em.optim.AdamW(em.optim.no_decay_groups(model, 0.1), lr=6e-4)
    """
    wd = _rate("no_decay_groups", "weight_decay", weight_decay)
    quiet: set[ParamId] = set()
    for _, m in model.named_modules():
        if _no_decay_module(m):
            quiet.update(p.id for p in m.parameters())
    decay: list[Param] = []
    no_decay: list[Param] = []
    for p in model.parameters():
        (no_decay if p.id in quiet or len(p.shape) < 2 else decay).append(p)
    return [
        {"params": decay, "weight_decay": wd},
        {"params": no_decay, "weight_decay": 0.0},
    ]
