"""Storage: creating arrays, reading them back, dtypes and moves between backends."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from ...dtype import DType
from .types import Raw, Shape


class StorageOps(abc.ABC):
    """Arrays in and out of a backend. ``dtype`` arguments are ember dtypes."""

    @abc.abstractmethod
    def from_numpy(self, a: np.ndarray, dtype: DType | None = None) -> Raw:
        """A copy of ``a`` on this backend, cast to ``dtype`` when given."""

    @abc.abstractmethod
    def to_numpy(self, x: Raw) -> np.ndarray:
        """A NumPy copy of ``x``."""

    @abc.abstractmethod
    def to_numpy_view(self, x: Raw) -> np.ndarray:
        """``x``'s values as NumPy, sharing memory where the backend allows it."""

    @abc.abstractmethod
    def receive(self, x: Any, source: Any) -> Raw:
        """``x``, an array of backend ``source``, as an array here (zero-copy where possible)."""

    @abc.abstractmethod
    def dtype_of(self, x: Raw) -> DType:
        """The ember dtype of ``x``."""

    @abc.abstractmethod
    def is_float(self, x: Raw) -> bool:
        """Whether ``x`` has a floating-point dtype (read on every op: keep it cheap)."""

    @abc.abstractmethod
    def scalar_ok(self, x: Raw) -> bool:
        """Whether kernels keep ``x``'s dtype for a Python scalar operand."""

    @abc.abstractmethod
    def asarray(self, x: Any) -> Raw:
        """``x`` (a kernel result, a NumPy value, a foreign array) as this backend's array type."""

    @abc.abstractmethod
    def cast(self, x: Raw, dtype: DType) -> Raw:
        """``x`` converted to ``dtype``."""

    @abc.abstractmethod
    def full(self, shape: Shape, value: float | int | bool, dtype: DType) -> Raw:
        """An array of ``shape`` filled with ``value``."""

    @abc.abstractmethod
    def empty(self, shape: Shape, dtype: DType) -> Raw:
        """An uninitialised array of ``shape``."""

    @abc.abstractmethod
    def arange(self, start: int, end: int, step: int, dtype: DType) -> Raw:
        """``start, start + step, ...`` below ``end``."""

    @abc.abstractmethod
    def copy(self, x: Raw) -> Raw:
        """A contiguous copy of ``x``."""

    @abc.abstractmethod
    def zeros_like(self, x: Raw) -> Raw:
        """Zeros of ``x``'s shape and dtype."""

    @abc.abstractmethod
    def ones_like(self, x: Raw) -> Raw:
        """Ones of ``x``'s shape and dtype."""

    @abc.abstractmethod
    def scalar(self, value: float | int | bool, like: Raw) -> Any:
        """``value`` as a scalar that never changes ``like``'s dtype in a kernel."""
