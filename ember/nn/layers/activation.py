"""Activation and dropout modules (thin wrappers over ``em.nn.functional``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._core.tensor import Tensor
from ...errors import ShapeError
from .. import functional as F
from ..module import Module

if TYPE_CHECKING:
    from ..._generator import Generator


class ReLU(Module):
    """``max(x, 0)`` elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class GELU(Module):
    """Gaussian error linear unit; ``approximate="tanh"`` for the tanh formula."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Dropout(Module):
    """Zeroes elements with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    Active only while ``self.training`` is on (``valid()`` and ``freeze()`` turn it off).
    """

    def __init__(self, p: float = 0.5, generator: Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ShapeError(f"Dropout: expected 0 <= p < 1, got {p}.")
        self.p = float(p)
        self.generator = generator  # an em.Generator, or None: the device's default generator

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        return F.dropout(x, self.p, True, self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(Module):
    """``x * tanh(softplus(x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.mish(x)


class Hardswish(Module):
    """``x * relu6(x + 3) / 6``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.hardswish(x)


class Hardsigmoid(Module):
    """``relu6(x + 3) / 6``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.hardsigmoid(x)
