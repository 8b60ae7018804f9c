"""``Observer``: calibrates the range of activations, to quantize them with fixed scales."""

from __future__ import annotations

import numpy as np

from .._core.qscheme import QuantScheme
from .._core.quantized import QuantizedTensor, from_parts
from .._core.tensor import Tensor
from ..dtype import float32, int8, int32
from ..errors import DTypeError, ShapeError

_KINDS = ("minmax", "percentile")


class Observer:
    """Running range of the tensors it sees -> one per-tensor scale (and zero point).

    ``minmax`` keeps the smallest and largest value seen. ``percentile`` takes the
    ``percentile``-th percentile of each observed batch (of ``|x|`` for symmetric, of both
    tails for affine) and averages them over batches, so rare outliers do not stretch the
    scale. ``quantize(x)`` then maps any tensor with that fixed scale (values outside the range
    saturate at the int8 limits).

    Args:
        kind: ``"minmax"`` or ``"percentile"``.
        mode: ``"symmetric"`` or ``"affine"``, as in ``QuantScheme``.
        percentile: In (0, 100]; used by ``"percentile"`` (default 99.99).

    Example:
        >>> obs = em.quantization.Observer()
        >>> _ = obs.observe(em.tensor([0.5, -2.0, 1.0]))
        >>> obs.scale_zero_point()
        (0.015748031437397003, 0)
    """

    def __init__(
        self, kind: str = "minmax", *, mode: str = "symmetric", percentile: float = 99.99
    ) -> None:
        if kind not in _KINDS:
            raise DTypeError(f"Observer: expected kind 'minmax' or 'percentile', got {kind!r}.")
        if not 0.0 < float(percentile) <= 100.0:
            raise ShapeError(f"Observer: expected a percentile in (0, 100], got {percentile}.")
        self.kind = kind
        self.scheme = QuantScheme(int8, mode, "tensor")
        self.percentile = float(percentile)
        self.count = 0
        self.lo = 0.0
        self.hi = 0.0

    def observe(self, x: Tensor) -> Tensor:
        """Fold ``x``'s range into the calibration; returns ``x`` (use it inside a forward)."""
        if not isinstance(x, Tensor) or not x.dtype.is_float:
            got = x.dtype.name if isinstance(x, Tensor) else type(x).__name__
            raise DTypeError(f"Observer.observe: expected a float tensor, got {got}.")
        a = x.without_autodiff().cast(float32).to_numpy().reshape(-1)
        if a.size == 0:
            return x
        if not np.isfinite(a).all():
            raise DTypeError(
                "Observer.observe: the tensor holds NaN or inf, which have no int8 range. "
                "Calibrate on finite activations."
            )
        if self.kind == "minmax":
            lo, hi = float(a.min()), float(a.max())
            self.lo = lo if self.count == 0 else min(self.lo, lo)
            self.hi = hi if self.count == 0 else max(self.hi, hi)
        else:
            if self.scheme.is_affine:
                lo = float(np.percentile(a, 100.0 - self.percentile))
                hi = float(np.percentile(a, self.percentile))
            else:
                hi = float(np.percentile(np.abs(a), self.percentile))
                lo = -hi
            n = self.count
            self.lo = (self.lo * n + lo) / (n + 1)
            self.hi = (self.hi * n + hi) / (n + 1)
        self.count += 1
        return x

    def scale_zero_point(self) -> tuple[float, int]:
        """The float32 scale and int zero point (0 for symmetric) of the calibrated range."""
        if self.count == 0:
            raise ShapeError(
                "Observer.scale_zero_point: nothing observed yet. Call observe(x) on "
                "calibration batches first."
            )
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)
        if not self.scheme.is_affine:
            amax = max(-lo, hi)
            s = np.float32(amax) / np.float32(127.0) if amax > 0 else np.float32(1.0)
            return float(s), 0
        s = (np.float32(hi) - np.float32(lo)) / np.float32(255.0)
        s = s if s > 0 else np.float32(1.0)
        z = int(np.clip(-128.0 - np.round(np.float32(lo) / s), -128, 127))
        return float(s), z

    def quantize(self, x: Tensor) -> QuantizedTensor:
        """``x`` quantized with the calibrated per-tensor scale (saturating)."""
        if not isinstance(x, Tensor) or not x.dtype.is_float:
            got = x.dtype.name if isinstance(x, Tensor) else type(x).__name__
            raise DTypeError(f"Observer.quantize: expected a float tensor, got {got}.")
        s, z = self.scale_zero_point()
        xv = x.without_autodiff().cast(float32)
        v = (xv / s).round()
        if self.scheme.is_affine:
            v = v + float(z)
        values = v.clamp(self.scheme.qmin, self.scheme.qmax).cast(int8)
        keep = (1,) * x.ndim
        dev = x.device.without_autodiff()
        scales = Tensor.full(keep, s, device=dev, dtype=float32)
        zeros = Tensor.full(keep, z, device=dev, dtype=int32) if self.scheme.is_affine else None
        q = from_parts(values, scales, zeros, self.scheme, x.dtype, None)
        strategy = x.gradient_checkpointing_strategy()
        return (
            q if strategy is None else q.autodiff().with_gradient_checkpointing_strategy(strategy)
        )

    def __repr__(self) -> str:
        return (
            f"Observer(kind={self.kind!r}, mode={self.scheme.mode!r}, range=({self.lo:.4g}, "
            f"{self.hi:.4g}), batches={self.count})"
        )
