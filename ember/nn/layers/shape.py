"""Parameter-free shape modules: Flatten and Identity."""

from __future__ import annotations

from typing import Any

from ..._core.tensor import Tensor
from ..module import Module


class Flatten(Module):
    """Merges dims ``start_dim..end_dim`` into one, like ``torch.nn.Flatten`` (default: all but
    the batch dim).

    Shapes: ``(B, C, H, W) -> (B, C * H * W)`` with the defaults.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Module):
    """Returns its input unchanged (a placeholder layer, e.g. in a ``Sequential``)."""

    def forward(self, x: Any) -> Any:
        return x
