"""Reductions, scans, statistics and sorting along one dim (dims are non-negative ints)."""

from __future__ import annotations

import abc

from .types import Raw, Shape


class ReduceOps(abc.ABC):
    """Reductions over one ``dim`` keep it (size 1); ``sum`` and ``mean`` give 0-d arrays."""

    @abc.abstractmethod
    def sum(self, x: Raw) -> Raw:
        """The sum of every element, 0-d."""

    @abc.abstractmethod
    def mean(self, x: Raw) -> Raw:
        """The mean of every element, 0-d, in ``x``'s dtype."""

    @abc.abstractmethod
    def sum_dim(self, x: Raw, dim: int) -> Raw:
        """Sum along ``dim``."""

    @abc.abstractmethod
    def mean_dim(self, x: Raw, dim: int) -> Raw:
        """Mean along ``dim``."""

    @abc.abstractmethod
    def max_dim(self, x: Raw, dim: int) -> Raw:
        """Maximum along ``dim``."""

    @abc.abstractmethod
    def min_dim(self, x: Raw, dim: int) -> Raw:
        """Minimum along ``dim``."""

    @abc.abstractmethod
    def prod_dim(self, x: Raw, dim: int) -> Raw:
        """Product along ``dim``."""

    @abc.abstractmethod
    def var(self, x: Raw, dim: int, correction: int) -> Raw:
        """Variance along ``dim`` over ``n - correction`` (inf or nan when n <= correction)."""

    @abc.abstractmethod
    def argmax(self, x: Raw, dim: int) -> Raw:
        """Index of the first maximum along ``dim`` (int64)."""

    @abc.abstractmethod
    def argmin(self, x: Raw, dim: int) -> Raw:
        """Index of the first minimum along ``dim`` (int64)."""

    @abc.abstractmethod
    def cumsum(self, x: Raw, dim: int) -> Raw:
        """Running sum along ``dim``, in ``x``'s dtype."""

    @abc.abstractmethod
    def cumprod(self, x: Raw, dim: int) -> Raw:
        """Running product along ``dim``, in ``x``'s dtype."""

    @abc.abstractmethod
    def argsort(self, x: Raw, dim: int, descending: bool) -> Raw:
        """Stable sorting indices along ``dim``: ties keep their input order (int64)."""

    @abc.abstractmethod
    def sort(self, x: Raw, dim: int, descending: bool) -> Raw:
        """Values sorted along ``dim``, stably."""

    @abc.abstractmethod
    def sum_to_shape(self, x: Raw, shape: Shape) -> Raw:
        """A broadcast gradient summed back to ``shape`` (the engine calls it per input)."""
