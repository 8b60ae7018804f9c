"""The tensor core's internal API: what ember's own layers (nn, optim, distributed, ...) use.

Not part of API.md. Modules above the core (everything outside ``ember/_core/``,
``ember/autodiff/`` and ``ember/checkpoint/``) never spell a Tensor's private fields; they use:

- ``t._raw``: the backend array (NumPy or torch), read at the cost of a plain attribute;
- ``t._hardware``: the plain ``Device`` (hardware only, no autodiff context; backend at ``.b``);
- ``t._ckpt_strategy``: the autodiff context, ``None`` for a plain tensor (what
  ``t.gradient_checkpointing_strategy()`` returns, without the call);
- ``from_raw(data, device, strategy)``: a tensor around a backend array (untracked);
- ``param_leaf(t, strategy, require_grad)``: a plain tensor lifted into ``strategy`` as a fresh
  leaf (the optimizer's step result, put back into its ``Param``);
- ``leaf_id(t)``: the key a require-grad leaf's gradient has in ``Gradients`` and in the
  ``on_leaf`` hook of ``ember.autodiff.backward``.

The three attributes are aliases of the Tensor slots (``tensor.py``), read-only by convention:
``tests/unit/api/test_layering.py`` checks that no upper module writes them, spells the fields
they stand for, or builds tensors with ``dispatch``'s private builders.
"""

from __future__ import annotations

from typing import Any

from ..autodiff.node import Node
from ..autodiff.requirement import Requirement
from ..checkpoint.strategy import GradientCheckpointingStrategy
from .device import Device
from .tensor import Tensor

_GRAD = Requirement.GRAD
_new = object.__new__


def from_raw(
    data: Any, device: Device, strategy: GradientCheckpointingStrategy | None = None
) -> Tensor:
    """A tensor holding the backend array ``data`` of ``device``'s backend, untracked.

    ``device`` is a plain device (``t._hardware``, or ``d.without_autodiff()``); ``strategy``
    makes the tensor autodiff (``None``: plain).
    """
    t = _new(Tensor)
    t._data = data
    t._dev = device
    t._strategy = strategy
    t._node = None
    return t


def param_leaf(t: Tensor, strategy: GradientCheckpointingStrategy, require_grad: bool) -> Tensor:
    """Plain ``t`` with context ``strategy``: a require-grad leaf when ``require_grad`` and ``t``
    is float, else untracked. One step (no intermediate autodiff tensor)."""
    data, dev = t._data, t._dev
    b = dev.b
    node = Node.leaf(data, b) if require_grad and b.is_float(data) else None
    out = _new(Tensor)
    out._data = data
    out._dev = dev
    out._strategy = strategy
    out._node = node
    return out


def leaf_id(t: Tensor) -> int | None:
    """The gradient key of require-grad leaf ``t``; ``None`` when ``t`` is no such leaf."""
    n = t._node
    return n.id if n is not None and n.requirement is _GRAD else None
