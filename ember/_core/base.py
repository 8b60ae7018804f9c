"""``TensorBase``: the four fields every ``Tensor`` holds, and nothing else.

A tensor is a raw backend array (``_data``), its hardware device (``_dev``), and an autodiff
context: a checkpointing strategy (``_strategy``, ``None`` for a plain tensor) and a graph node
(``_node``, ``None`` when untracked). ``Tensor`` (ember/_core/tensor.py) is this base plus one
mixin class per family of methods; the mixins test operands with ``isinstance(x, TensorBase)``
and build results with ``dispatch.wrap``, so none of them imports ``tensor.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..autodiff.node import Node
    from ..checkpoint.strategy import GradientCheckpointingStrategy
    from .device import Device
    from .tensor import Tensor


class TensorBase:
    """The storage of a tensor: four slots, no methods (see ``Tensor``)."""

    __slots__ = ("__weakref__", "_data", "_dev", "_node", "_strategy")

    _data: Any
    _dev: Device
    _strategy: GradientCheckpointingStrategy | None
    _node: Node | None
    # the internal API's names for the first three (aliases of the slots, set below the class)
    _raw: Any
    _hardware: Device
    _ckpt_strategy: GradientCheckpointingStrategy | None


# The internal API's names for three of the slots (what modules above the core read, through
# ember/_core/internal.py): aliases of the slot descriptors, as fast as the fields they name.
# Read-only by convention.
TensorBase._raw = TensorBase.__dict__["_data"]
TensorBase._hardware = TensorBase.__dict__["_dev"]
TensorBase._ckpt_strategy = TensorBase.__dict__["_strategy"]


# What the mixins test operands against: ``TensorBase`` at run time, ``Tensor`` to the type
# checker (so ``isinstance(x, AnyTensor)`` narrows to ``Tensor``), without importing tensor.py.
if TYPE_CHECKING:
    AnyTensor = Tensor
else:
    AnyTensor = TensorBase
