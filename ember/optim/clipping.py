"""Gradient clipping by value and by global norm (PyTorch's ``clip_grad_*_`` semantics)."""

from __future__ import annotations

import math

from ..errors import ShapeError
from .grads import GradientsParams


def clip_grad_value(grads: GradientsParams, clip_value: float) -> GradientsParams:
    """Clamp every gradient to ``[-clip_value, clip_value]`` (in the container, returned)."""
    for pid, g in grads.items():
        grads._grads[pid] = g.clamp(-clip_value, clip_value)
    return grads


def clip_grad_norm(grads: GradientsParams, max_norm: float, eps: float = 1e-6) -> float:
    """Scale all gradients together so their global L2 norm is at most ``max_norm``.

    Returns:
        The global norm before clipping.
    """
    items = list(grads.items())
    sq = None
    for _, g in items:
        s = (g * g).sum()
        # add on the first gradient's device so that only one value crosses to the host
        sq = s if sq is None else sq + (s if s._dev is sq._dev else s.to_device(sq._dev))
    total = 0.0 if sq is None else math.sqrt(float(sq.item()))
    scale = max_norm / (total + eps)
    if scale < 1.0:
        for pid, g in items:
            grads._grads[pid] = g * scale
    return total


class GradientClipping:
    """Clipping an optimizer applies to the gradients before every step.

    Example:
        >>> optim = SGD(grad_clipping=GradientClipping.norm(1.0))
    """

    __slots__ = ("kind", "limit")

    def __init__(self, kind: str, limit: float) -> None:
        if kind not in ("value", "norm") or not limit > 0:
            raise ShapeError(
                f"GradientClipping: expected kind 'value' or 'norm' and a limit > 0, got "
                f"{kind!r}, {limit}. Use GradientClipping.value(v) or GradientClipping.norm(n)."
            )
        self.kind = kind
        self.limit = float(limit)

    @staticmethod
    def value(clip_value: float) -> GradientClipping:
        """Clamp each gradient element to ``[-clip_value, clip_value]``."""
        return GradientClipping("value", clip_value)

    @staticmethod
    def norm(max_norm: float) -> GradientClipping:
        """Rescale so the global L2 norm over all gradients is at most ``max_norm``."""
        return GradientClipping("norm", max_norm)

    def apply(self, grads: GradientsParams) -> GradientsParams:
        if self.kind == "value":
            return clip_grad_value(grads, self.limit)
        clip_grad_norm(grads, self.limit)
        return grads

    def __repr__(self) -> str:
        return f"GradientClipping.{self.kind}({self.limit})"
