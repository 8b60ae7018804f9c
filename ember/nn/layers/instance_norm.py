"""Instance normalisation layers: InstanceNorm1d / 2d / 3d, PyTorch's parameters and buffers."""

from __future__ import annotations

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import ShapeError
from ..instance_norm import instance_norm
from ..module import Module
from ..param import Param
from .norm import add_norm_state


class _InstanceNorm(Module):
    spatial: int = 0  # spatial dims of a batched input
    weight: Param | None
    bias: Param | None
    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        # PyTorch's state names; instance norm never counts num_batches_tracked (it is there for
        # PyTorch's state_dict; momentum=None: the running statistics stay frozen)
        add_norm_state(self, num_features, affine, track_running_stats, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        """Instance statistics in training or untracked (updating tracked running ones in
        training), the running ones in evaluation when tracked."""
        r = self.spatial + 2
        if x.ndim not in (r - 1, r) or x.shape[x.ndim - r + 1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}: expected an input (N, {self.num_features}, "
                f"{', '.join('*' * self.spatial)}) of rank {r} or an unbatched one of rank "
                f"{r - 1}, with {self.num_features} channels, got shape {x.shape}."
            )
        unbatched = x.ndim == r - 1
        if unbatched:
            x = x.unsqueeze_dim(0)
        tracked = self.track_running_stats
        rm = self.running_mean if tracked else None
        rv = self.running_var if tracked else None
        w = None if self.weight is None else self.weight.val()
        b = None if self.bias is None else self.bias.val()
        use_input = self.training or not tracked
        m = 0.0 if self.momentum is None else self.momentum
        out, mean, var = instance_norm(x, rm, rv, w, b, use_input, m, self.eps)
        if tracked and use_input and mean is not None and var is not None:
            self.running_mean, self.running_var = mean, var
        return out.squeeze_dim(0) if unbatched else out

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Normalises each (sample, channel) of ``(N, C, L)`` (or unbatched ``(C, L)``) over ``L``.

    ``affine`` adds a per-channel weight and bias; ``track_running_stats`` keeps running
    statistics (unbiased variance, batch-averaged) updated in training and used after
    ``valid()``. A wrong channel count is an error even without ``affine`` (PyTorch warns).
    """

    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` (or ``(C, H, W)``); see ``InstanceNorm1d``."""

    spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``); see
    ``InstanceNorm1d``."""

    spatial = 3
