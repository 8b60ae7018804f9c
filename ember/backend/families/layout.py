"""Layout kernels: reshaping, permuting, broadcasting, joining, splitting and flipping."""

from __future__ import annotations

import abc
from collections.abc import Sequence

from .types import Raw, Shape


class LayoutOps(abc.ABC):
    """Kernels that move or repeat values without arithmetic (views where the backend can)."""

    @abc.abstractmethod
    def reshape(self, x: Raw, shape: Shape) -> Raw:
        """``x`` with a new shape of the same size."""

    @abc.abstractmethod
    def permute(self, x: Raw, dims: Sequence[int]) -> Raw:
        """``x`` with its dims reordered."""

    @abc.abstractmethod
    def expand(self, x: Raw, shape: Shape) -> Raw:
        """``x`` broadcast to ``shape`` (a view)."""

    @abc.abstractmethod
    def cat(self, xs: Sequence[Raw], dim: int) -> Raw:
        """Arrays joined along an existing ``dim``."""

    @abc.abstractmethod
    def stack(self, xs: Sequence[Raw], dim: int) -> Raw:
        """Arrays joined along a new ``dim``."""

    @abc.abstractmethod
    def split_sizes(self, x: Raw, sizes: Sequence[int], dim: int) -> list[Raw]:
        """Consecutive pieces of ``sizes`` along ``dim`` (the sizes sum to the dim's size)."""

    @abc.abstractmethod
    def flip(self, x: Raw, dims: Sequence[int]) -> Raw:
        """``x`` reversed along ``dims``."""

    @abc.abstractmethod
    def repeat_dim(self, x: Raw, dim: int, times: int) -> Raw:
        """``x`` tiled ``times`` along ``dim``."""

    @abc.abstractmethod
    def tril(self, x: Raw, diagonal: int) -> Raw:
        """The lower triangle of the last two dims (the rest zeroed)."""

    @abc.abstractmethod
    def triu(self, x: Raw, diagonal: int) -> Raw:
        """The upper triangle of the last two dims (the rest zeroed)."""
