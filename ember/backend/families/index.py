"""Index-driven kernels: basic and advanced keys, selects, gathers and their scatters.

Index arrays are int arrays already checked to lie in range by ``ember._core``.
"""

from __future__ import annotations

import abc

from .types import Key, Raw, Shape


class IndexOps(abc.ABC):
    """Reading values at positions, and the adds and writes their gradients need (on copies)."""

    @abc.abstractmethod
    def index(self, x: Raw, key: Key) -> Raw:
        """``x[key]``."""

    @abc.abstractmethod
    def index_put_zeros(self, shape: Shape, key: Key, values: Raw) -> Raw:
        """Zeros of ``shape`` with ``values`` written at ``key``."""

    @abc.abstractmethod
    def slice_assign(self, x: Raw, values: Raw, key: Key) -> Raw:
        """A copy of ``x`` with ``values`` written at ``key``."""

    @abc.abstractmethod
    def select(self, x: Raw, indices: Raw, dim: int) -> Raw:
        """Slices of ``x`` at ``indices`` along ``dim`` (``indices``' shape replaces the dim)."""

    @abc.abstractmethod
    def select_add(self, x: Raw, indices: Raw, values: Raw, dim: int) -> Raw:
        """A copy of ``x`` with ``values`` added at ``indices`` along ``dim`` (repeats sum)."""

    @abc.abstractmethod
    def gather(self, x: Raw, indices: Raw, dim: int) -> Raw:
        """``x`` at ``indices[i]`` along ``dim``, position by position."""

    @abc.abstractmethod
    def scatter_add(self, x: Raw, indices: Raw, values: Raw, dim: int) -> Raw:
        """A copy of ``x`` with ``values[i]`` added at ``indices[i]`` along ``dim``."""

    @abc.abstractmethod
    def take_along_dim(self, x: Raw, idx: Raw, dim: int) -> Raw:
        """``x`` at ``idx`` along ``dim`` (``idx`` broadcasts on the other dims)."""

    @abc.abstractmethod
    def put_along_dim_zeros(self, shape: Shape, idx: Raw, values: Raw, dim: int) -> Raw:
        """Zeros of ``shape`` with ``values`` written at ``idx`` along ``dim``."""
