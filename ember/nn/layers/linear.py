"""Linear and Embedding layers."""

from __future__ import annotations

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``[out_features, in_features]``.

    Initialised like PyTorch: weight and bias from U(-1/sqrt(in), 1/sqrt(in)).

    Shapes: ``(*, in_features) -> (*, out_features)``.

    Example:
        >>> Linear(4, 2)(Tensor.ones((3, 4))).shape
        (3, 2)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        shape = (out_features, in_features)
        self.weight = Param(init.kaiming_uniform(shape, device=device, dtype=dtype))
        self.bias = (
            Param(init.bias_uniform((out_features,), in_features, device=device, dtype=dtype))
            if bias
            else None
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight.val(), None if self.bias is None else self.bias.val())

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table ``weight[indices]`` of shape ``[num_embeddings, embedding_dim]``, N(0, 1).

    Shapes: int indices ``(*) -> (*, embedding_dim)``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        shape = (num_embeddings, embedding_dim)
        self.weight = Param(init.normal(shape, 0.0, 1.0, device=device, dtype=dtype))

    def forward(self, indices: Tensor) -> Tensor:
        return F.embedding(indices, self.weight.val())

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
