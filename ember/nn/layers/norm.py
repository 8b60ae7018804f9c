"""Normalisation layers: LayerNorm, RmsNorm, BatchNorm1d/2d, GroupNorm."""

from __future__ import annotations

from collections.abc import Sequence

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32, int64
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param


def _shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Normalises the trailing ``normalized_shape`` dims, then scales by ``weight`` (ones) and
    shifts by ``bias`` (zeros).

    Shapes: ``(*, *normalized_shape)`` unchanged.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.normalized_shape, self.eps = _shape(normalized_shape), float(eps)
        ns = self.normalized_shape
        self.weight = (
            Param(init.ones(ns, device=device, dtype=dtype)) if elementwise_affine else None
        )
        has_bias = elementwise_affine and bias
        self.bias = Param(init.zeros(ns, device=device, dtype=dtype)) if has_bias else None

    def forward(self, x: Tensor) -> Tensor:
        w = None if self.weight is None else self.weight.val()
        b = None if self.bias is None else self.bias.val()
        return F.layer_norm(x, self.normalized_shape, w, b, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class RmsNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape`` dims.

    ``eps=None`` uses the dtype's machine epsilon, as ``torch.nn.RMSNorm`` does.
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = F._EPS[dtype.name] if eps is None else float(eps)
        ns = self.normalized_shape
        self.weight = (
            Param(init.ones(ns, device=device, dtype=dtype)) if elementwise_affine else None
        )

    def forward(self, x: Tensor) -> Tensor:
        w = None if self.weight is None else self.weight.val()
        return F.rms_norm(x, self.normalized_shape, w, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


def add_norm_state(
    m: Module, features: int, affine: bool, track: bool, device: Device | None, dtype: DType
) -> None:
    """PyTorch's per-channel norm state on ``m``: ``weight`` (ones) and ``bias`` (zeros) Params
    when ``affine`` (else None), and the ``running_mean`` / ``running_var`` /
    ``num_batches_tracked`` buffers (on the plain device) when ``track``."""
    c = (features,)
    m.weight = Param(init.ones(c, device=device, dtype=dtype)) if affine else None
    m.bias = Param(init.zeros(c, device=device, dtype=dtype)) if affine else None
    if track:
        plain = None if device is None else device.without_autodiff()
        m.register_buffer("running_mean", init.zeros(c, device=plain, dtype=dtype))
        m.register_buffer("running_var", init.ones(c, device=plain, dtype=dtype))
        m.register_buffer("num_batches_tracked", Tensor.zeros((), device=plain, dtype=int64))


class _BatchNorm(Module):
    ranks: tuple[int, ...] = ()
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
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, float(eps), momentum
        self.track_running_stats = track_running_stats
        add_norm_state(self, num_features, affine, track_running_stats, device, dtype)
        if track_running_stats:
            object.__setattr__(self, "_tracked_mirror", (self.num_batches_tracked, 0))

    def forward(self, x: Tensor) -> Tensor:
        """Batch statistics in training (updating the running ones), running ones otherwise."""
        name = type(self).__name__
        if x.ndim not in self.ranks or x.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}: expected an input of rank {' or '.join(map(str, self.ranks))} with "
                f"{self.num_features} channels in dim 1, got shape {x.shape}."
            )
        w = None if self.weight is None else self.weight.val()
        b = None if self.bias is None else self.bias.val()
        if not self.track_running_stats:
            return F.batch_norm(x, None, None, w, b, True, 0.0, self.eps)[0]
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, w, b, False, 0.0, self.eps)[
                0
            ]
        count = self._count_batch()
        m = self.momentum
        if m is None:  # cumulative moving average
            m = 1.0 / count
        out, mean, var = F.batch_norm(
            x, self.running_mean, self.running_var, w, b, True, m, self.eps
        )
        if mean is not None and var is not None:
            self.running_mean, self.running_var = mean, var
        return out

    def _count_batch(self) -> int:
        """Add one to ``num_batches_tracked`` and return the new count.

        The count is mirrored on the host next to the buffer it belongs to, so a training step
        reads nothing back from the device; the buffer is read once only after something else
        (``load_state_dict``, a move) replaced it.
        """
        tracked = self.num_batches_tracked
        mirror = self.__dict__.get("_tracked_mirror")
        if mirror is not None and mirror[0] is tracked:
            count = mirror[1] + 1
        elif self.momentum is not None:
            # only the cumulative average reads the count: the device buffer alone counts (no
            # host read, so an em.capture recording that replaced the buffer can count on)
            self.num_batches_tracked = tracked + 1
            return 0
        else:
            count = int(tracked.item()) + 1
        self.num_batches_tracked = tracked = tracked + 1
        object.__setattr__(self, "_tracked_mirror", (tracked, count))
        return count

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(B, C)`` or ``(B, C, L)`` inputs over all dims but ``C``.

    In training it uses the batch statistics and updates ``running_mean`` / ``running_var``
    (momentum 0.1, unbiased variance); after ``valid()`` it uses the running statistics.
    """

    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(B, C, H, W)`` inputs; see ``BatchNorm1d``."""

    ranks = (4,)


class GroupNorm(Module):
    """Normalises each of ``num_groups`` channel groups per sample, then a per-channel affine.

    Shapes: ``(B, C, *)`` unchanged.
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ShapeError(
                f"GroupNorm: expected num_channels divisible by num_groups, got {num_channels} "
                f"and {num_groups}."
            )
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, float(eps)
        c = (num_channels,)
        self.weight = Param(init.ones(c, device=device, dtype=dtype)) if affine else None
        self.bias = Param(init.zeros(c, device=device, dtype=dtype)) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm: expected an input (B, {self.num_channels}, *), got shape {x.shape}."
            )
        g = x.reshape((x.shape[0], self.num_groups, -1))  # (B, C, *) -> (B, G, C / G * rest)
        # per-group statistics are a layer norm over the last dim: one fused row
        y = F.layer_norm(g, g.shape[-1], eps=self.eps).reshape(x.shape)
        if self.weight is not None and self.bias is not None:
            bshape = (1, self.num_channels) + (1,) * (x.ndim - 2)
            y = y * self.weight.val().reshape(bshape) + self.bias.val().reshape(bshape)
        return y

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}"
