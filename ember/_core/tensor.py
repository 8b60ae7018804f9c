"""The ``Tensor`` class: an immutable value with its own autodiff context.

A tensor holds a raw backend array, its hardware device, and an autodiff context: ``None``
(plain) or a checkpointing strategy plus an optional graph node (SEMANTICS.md §1-§2). Every method
returns a new tensor; none changes the receiver.

``Tensor`` is its storage (``TensorBase``: four slots), its constructors (below), and one mixin
per family of methods, each in the module of that family's name — the names the op rows
(ember/ops/) and the backend kernels (ember/backend/families/) use:

===================  ========================================================================
``reading.py``       shape, dtype, device; the host reads (``to_numpy``, ``item``, ``tolist``)
``context.py``       autodiff context and lineage, ``to_device``, ``backward``, ``grad``
``elementwise.py``   arithmetic and operators, comparisons, math, rounding, casts
``linalg.py``        ``matmul`` / ``@``
``layout.py``        reshape, permute, squeeze, expand, flip, narrow/chunk/split, cat/stack
``index.py``         ``t[...]``, slice, select, gather, scatter, slice_assign
``reduce.py``        sums, means, extrema, var/std, prod, cumsum, sort/argsort/topk
===================  ========================================================================

The mixins import neither this module nor each other: they test operands with
``isinstance(x, AnyTensor)`` and build results through ``dispatch``.
"""

from __future__ import annotations

from typing import Any

from ..dtype import float32
from .base import TensorBase
from .context import ContextMethods
from .creation import arange as _arange
from .creation import empty as _empty
from .creation import fill_value as _fill_value
from .creation import from_data as _from_data
from .creation import full as _full
from .creation import random as _random
from .device import Device
from .dispatch import wrap
from .elementwise import ElementwiseMethods
from .index import IndexMethods
from .layout import LayoutMethods
from .linalg import LinalgMethods
from .quantized import QuantizeMethods
from .reading import ReadingMethods
from .reduce import ReduceMethods
from .spellings import SpellingsMethods


class Tensor(
    SpellingsMethods,  # PyTorch spellings first: sum/reshape/permute/transpose take both forms
    ReadingMethods,
    ContextMethods,
    ElementwiseMethods,
    LinalgMethods,
    LayoutMethods,
    IndexMethods,
    ReduceMethods,
    QuantizeMethods,
    TensorBase,
):
    """An n-dimensional array on a device, plain or associated with autodiff.

    Example:
        >>> x = Tensor.ones((2, 2), device=Device.cpu().autodiff()).require_grad()
        >>> grads = x.powf_scalar(2.0).sum().backward()
        >>> x.grad(grads).tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """

    __slots__ = ()
    __hash__ = object.__hash__  # identity; == is elementwise
    __array_priority__ = 1000  # make ndarray <op> Tensor defer to Tensor

    def __init__(self, data: Any, *, device: Device | None = None, dtype: Any = None) -> None:
        t = _from_data(Tensor, data, device=device, dtype=dtype)
        self._data, self._dev, self._strategy, self._node = t._data, t._dev, t._strategy, None

    # ------------------------------------------------------------------ creation
    @staticmethod
    def zeros(shape: Any, *, device: Device | None = None, dtype: Any = float32) -> Tensor:
        """Zeros of ``shape``."""
        return _full(Tensor, shape, 0, device=device, dtype=dtype, op="zeros")

    @staticmethod
    def ones(shape: Any, *, device: Device | None = None, dtype: Any = float32) -> Tensor:
        """Ones of ``shape``."""
        return _full(Tensor, shape, 1, device=device, dtype=dtype, op="ones")

    @staticmethod
    def empty(shape: Any, *, device: Device | None = None, dtype: Any = float32) -> Tensor:
        """Uninitialised values of ``shape``."""
        return _empty(Tensor, shape, device=device, dtype=dtype)

    @staticmethod
    def full(
        shape: Any, value: float | int | bool, *, device: Device | None = None, dtype: Any = None
    ) -> Tensor:
        """``value`` everywhere; dtype float32 for a float, int64 for an int, bool for a bool."""
        return _full(Tensor, shape, value, device=device, dtype=dtype, op="full")

    @staticmethod
    def zeros_like(t: Tensor) -> Tensor:
        """Zeros with ``t``'s shape, dtype, device and autodiff context (untracked)."""
        return t._like(0)

    @staticmethod
    def ones_like(t: Tensor) -> Tensor:
        return t._like(1)

    @staticmethod
    def full_like(t: Tensor, value: float | int | bool) -> Tensor:
        return t._like(_fill_value("full_like", value, t.dtype))

    def _like(self, value: float | int | bool) -> Tensor:
        b = self._dev.b
        return wrap(Tensor, b.full(self.shape, value, self.dtype), self._dev, self._strategy)

    @staticmethod
    def from_data(data: Any, *, device: Device | None = None, dtype: Any = None) -> Tensor:
        """A tensor from nested lists, scalars or a NumPy array (copied)."""
        return _from_data(Tensor, data, device=device, dtype=dtype)

    @staticmethod
    def arange(
        start: int, end: int | None = None, step: int = 1, *, device: Device | None = None
    ) -> Tensor:
        """int64 values ``start, start + step, ...`` below ``end``."""
        return _arange(Tensor, start, end, step, device=device)

    @staticmethod
    def random(
        shape: Any,
        distribution: Any,
        *,
        device: Device | None = None,
        dtype: Any = float32,
        generator: Any = None,
    ) -> Tensor:
        """Samples of ``em.Distribution.uniform/normal/bernoulli``, from ``generator`` (an
        ``em.Generator``) or the device's default generator (seeded by ``em.seed``)."""
        return _random(Tensor, shape, distribution, device=device, dtype=dtype, generator=generator)
