"""Random draws from the backend's own generator, and its state for training records."""

from __future__ import annotations

import abc

from ...dtype import DType
from .types import Raw, RngState, Shape


class RandomOps(abc.ABC):
    """Sampling from one generator per backend instance, seeded by ``em.seed``."""

    @abc.abstractmethod
    def seed(self, n: int) -> None:
        """Reset the generator to seed ``n``."""

    @abc.abstractmethod
    def uniform(self, shape: Shape, lo: float, hi: float, dtype: DType) -> Raw:
        """Draws from U[lo, hi)."""

    @abc.abstractmethod
    def normal(self, shape: Shape, mean: float, std: float, dtype: DType) -> Raw:
        """Draws from N(mean, std^2)."""

    @abc.abstractmethod
    def bernoulli(self, shape: Shape, p: float, dtype: DType) -> Raw:
        """1 with probability ``p``, else 0."""

    @abc.abstractmethod
    def rng_state(self) -> RngState:
        """The generator's state as JSON-ready data (a training record stores it)."""

    @abc.abstractmethod
    def set_rng_state(self, state: RngState) -> None:
        """Restore a state ``rng_state`` returned; later draws repeat the ones after it."""
