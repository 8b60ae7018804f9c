"""Linear and Embedding layers."""

from __future__ import annotations

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import DTypeError, ShapeError
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

    ``padding_idx``, as PyTorch: that row starts at zeros and gets no gradient (positions holding
    it read the row's current value as a constant).

    Shapes: int indices ``(*) -> (*, embedding_dim)``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, int):
                raise DTypeError(f"Embedding: expected an int padding_idx, got {padding_idx!r}.")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ShapeError(
                    f"Embedding: padding_idx {padding_idx} is out of range "
                    f"[-{num_embeddings}, {num_embeddings})."
                )
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        shape = (num_embeddings, embedding_dim)
        w = init.normal(shape, 0.0, 1.0, device=device, dtype=dtype)
        if padding_idx is not None:
            zero = Tensor.zeros((1, embedding_dim), device=w.device, dtype=w.dtype)
            w = w.slice_assign([slice(padding_idx, padding_idx + 1)], zero)  # Param relifts it
        self.weight = Param(w)

    def forward(self, indices: Tensor) -> Tensor:
        w = self.weight.val()
        out = F.embedding(indices, w)
        p = self.padding_idx
        if p is None or not w.is_tracked():
            return out
        row = w.without_autodiff()[p]  # the row's value, as a constant
        return out.mask_where((indices == p).unsqueeze_dim(-1), row)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
