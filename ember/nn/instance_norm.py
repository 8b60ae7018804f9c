"""``F.instance_norm``: per-sample, per-channel normalisation (PyTorch's functional form).

Instance norm is batch norm of one sample whose channels are the ``N * C`` instances: the input
is viewed as ``(1, N * C, S)`` and normalised by the fused ``batch_norm`` row (one pass over
memory, its fused backward), with the per-channel weight and bias tiled over the batch.
Tensors are immutable, so the running statistics are returned, not updated in place.
"""

from __future__ import annotations

import math

from .._core import checks
from .._core.dispatch import apply
from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from .losses import _const, _float

_OP = "instance_norm"
_BATCH_NORM = OPS["batch_norm"]


def _channel_vector(x: Tensor, v: Tensor | None, what: str) -> Tensor | None:
    """``v`` checked to be a float (C,) vector (of x's dtype for the affine parameters)."""
    if v is None:
        return None
    v = _float(_OP, v, what)
    c = x.shape[1]
    if v.shape != (c,):
        raise ShapeError(
            f"{_OP}: expected {what} of shape ({c},) for an input with {c} channels, got "
            f"{v.shape}. Pass one value per channel of dim 1."
        )
    if what in ("weight", "bias") and v.dtype != x.dtype:
        raise DTypeError(
            f"{_OP}: expected {what} of the input's dtype {x.dtype.name}, got {v.dtype.name}. "
            f"Cast it with .cast(em.{x.dtype.name})."
        )
    return v


def _tiled(x: Tensor, v: Tensor | None, fill: float) -> Tensor:
    """The (C,) parameter repeated for each of the N samples: (N * C,); ``fill`` when None."""
    n, c = x.shape[0], x.shape[1]
    if v is None:
        return _const(x, (n * c,), fill)
    if n == 1:
        return v
    return v.reshape((1, c)).expand((n, c)).reshape((n * c,))


def _running(
    x: Tensor, rm: Tensor | None, rv: Tensor | None, momentum: float, spatial: int
) -> tuple[Tensor | None, Tensor | None]:
    """The running statistics moved by ``momentum`` towards the instance statistics averaged
    over the batch (unbiased variance per instance, as PyTorch); constants, no gradient."""
    n, c = x.shape[0], x.shape[1]
    flat = x.without_autodiff().reshape((n, c, spatial))
    mean = flat.mean_dim(2)  # (N, C, 1)
    centered = flat - mean
    var = (centered * centered).sum_dim(2) / (spatial - 1)
    new_rm = None if rm is None else rm * (1 - momentum) + mean.mean_dim(0).reshape((c,)) * momentum
    new_rv = None if rv is None else rv * (1 - momentum) + var.mean_dim(0).reshape((c,)) * momentum
    return new_rm, new_rv


def instance_norm(
    x: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Normalise each (sample, channel) over its spatial dims, then a per-channel affine.

    Args:
        x: (N, C, *spatial).
        running_mean, running_var: (C,) statistics, or None (then ``use_input_stats`` must be
            True).
        weight, bias: (C,) of x's dtype, or None (ones / zeros).
        use_input_stats: Normalise with each instance's statistics (biased variance) and
            return the running statistics moved by ``momentum`` towards their batch average
            (unbiased variance, as PyTorch). When False, normalise with the running statistics
            and return them unchanged.

    Returns:
        (output of x's shape, new running_mean, new running_var); a statistic is ``None`` when
        none was given, and never carries gradients.
    """
    x = _float(_OP, x)
    if x.ndim < 2:
        raise ShapeError(
            f"{_OP}: expected an input (N, C, *spatial) of rank >= 2, got shape {x.shape}. "
            "Add the batch dim with unsqueeze_dim(0)."
        )
    rm = _channel_vector(x, running_mean, "running_mean")
    rv = _channel_vector(x, running_var, "running_var")
    w = _channel_vector(x, weight, "weight")
    b = _channel_vector(x, bias, "bias")
    e = checks.float_arg(_OP, "eps", eps)
    n, c = x.shape[0], x.shape[1]
    if not use_input_stats:
        if rm is None or rv is None:
            raise ShapeError(
                f"{_OP}: expected running_mean and running_var when use_input_stats=False, got "
                "None. Pass use_input_stats=True to normalise with each instance's statistics."
            )
        # the running statistics are per channel: the application of batch norm's statistics
        bshape = (1, c) + (1,) * (x.ndim - 2)
        rm_c, rv_c = rm.without_autodiff().detach(), rv.without_autodiff().detach()
        scale = (rv_c + e).sqrt().recip()
        if w is not None:
            scale = w * scale
        shift = -rm_c * scale if b is None else b - rm_c * scale
        return x * scale.reshape(bshape) + shift.reshape(bshape), rm, rv
    spatial = math.prod(x.shape[2:])
    if spatial <= 1:
        raise ShapeError(
            f"{_OP}: expected more than 1 spatial element per instance with use_input_stats, "
            f"got input {x.shape}. Use a larger input or use_input_stats=False with running "
            "statistics."
        )
    flat = x.reshape((1, n * c, spatial))
    wt, bt = _tiled(x, w, 1.0), _tiled(x, b, 0.0)
    out = apply(_BATCH_NORM, (flat, wt, bt), {"eps": e}).reshape(x.shape)
    if rm is None and rv is None:
        return out, None, None
    m = checks.float_arg(_OP, "momentum", momentum)
    new_rm, new_rv = _running(x, rm, rv, m, spatial)
    return out, new_rm, new_rv
