"""Matrix products."""

from __future__ import annotations

import abc

from .types import Raw


class LinalgOps(abc.ABC):
    """Products that keep the operands' dtype."""

    @abc.abstractmethod
    def matmul(self, x: Raw, y: Raw) -> Raw:
        """x @ y with batch dims broadcast."""

    @abc.abstractmethod
    def linear(self, x: Raw, w: Raw, b: Raw) -> Raw:
        """x (*, K) @ w (N, K)^T + b (N,); a 0-d ``b`` means no bias."""
