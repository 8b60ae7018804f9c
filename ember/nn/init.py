"""Parameter initialisers matching PyTorch's defaults (``torch.nn.init``).

Every initialiser returns a new tensor drawn with ``Tensor.random`` (seeded by ``em.seed``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._core.creation import Distribution
from .._core.device import Device
from .._core.tensor import Tensor
from ..dtype import DType, float32
from ..errors import ShapeError


def fans(shape: Sequence[int]) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight ``[out, in, *kernel]`` as PyTorch computes them."""
    if len(shape) < 2:
        raise ShapeError(f"fans: expected a weight of rank >= 2, got shape {tuple(shape)}.")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def uniform(
    shape: Sequence[int],
    low: float,
    high: float,
    *,
    device: Device | None = None,
    dtype: DType = float32,
) -> Tensor:
    """Samples of U(low, high) of ``shape``."""
    return Tensor.random(tuple(shape), Distribution.uniform(low, high), device=device, dtype=dtype)


def normal(
    shape: Sequence[int],
    mean: float = 0.0,
    std: float = 1.0,
    *,
    device: Device | None = None,
    dtype: DType = float32,
) -> Tensor:
    """Samples of N(mean, std^2) of ``shape``."""
    return Tensor.random(tuple(shape), Distribution.normal(mean, std), device=device, dtype=dtype)


def zeros(shape: Sequence[int], *, device: Device | None = None, dtype: DType = float32) -> Tensor:
    return Tensor.zeros(tuple(shape), device=device, dtype=dtype)


def ones(shape: Sequence[int], *, device: Device | None = None, dtype: DType = float32) -> Tensor:
    return Tensor.ones(tuple(shape), device=device, dtype=dtype)


def kaiming_uniform(
    shape: Sequence[int],
    a: float = math.sqrt(5.0),
    *,
    device: Device | None = None,
    dtype: DType = float32,
) -> Tensor:
    """U(-b, b) with ``b = sqrt(6 / ((1 + a^2) fan_in))``; the default ``a`` gives
    ``1 / sqrt(fan_in)``, PyTorch's default for Linear and Conv weights."""
    fin = fans(shape)[0]
    bound = math.sqrt(6.0 / ((1.0 + a * a) * fin)) if fin > 0 else 0.0
    return uniform(shape, -bound, bound, device=device, dtype=dtype)


def xavier_uniform(
    shape: Sequence[int],
    gain: float = 1.0,
    *,
    device: Device | None = None,
    dtype: DType = float32,
) -> Tensor:
    """U(-b, b) with ``b = gain * sqrt(6 / (fan_in + fan_out))``."""
    fin, fout = fans(shape)
    bound = gain * math.sqrt(6.0 / (fin + fout))
    return uniform(shape, -bound, bound, device=device, dtype=dtype)


def bias_uniform(
    shape: Sequence[int], fan_in: int, *, device: Device | None = None, dtype: DType = float32
) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default bias of Linear and Conv."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return uniform(shape, -bound, bound, device=device, dtype=dtype)
