"""Gradient clipping by value and by global norm (PyTorch's ``clip_grad_*_`` semantics)."""

from __future__ import annotations

from .._core.internal import from_raw
from .._core.tensor import Tensor
from ..errors import ShapeError
from .grads import GradientsParams


def clip_grad_value(grads: GradientsParams, clip_value: float) -> GradientsParams:
    """Clamp every gradient to ``[-clip_value, clip_value]`` (in the container, returned)."""
    for pid, g in grads.items():
        grads._grads[pid] = g.clamp(-clip_value, clip_value)
    return grads


def clip_grad_norm(grads: GradientsParams, max_norm: float, eps: float = 1e-6) -> float:
    """Scale all gradients together so their global L2 norm is at most ``max_norm``.

    The gradients are scaled on their devices; only the returned norm is read back (one host
    read). ``GradientClipping.norm`` clips without reading anything back.

    Returns:
        The global norm before clipping.
    """
    total = _clip_grad_norm_on_device(grads, max_norm, eps)
    return 0.0 if total is None else float(total.item())


def _clip_grad_norm_on_device(
    grads: GradientsParams, max_norm: float, eps: float = 1e-6
) -> Tensor | None:
    """``clip_grad_norm`` without a host read: returns the global norm as a 0-d tensor.

    Every gradient is multiplied by ``min(1, max_norm / (norm + eps))``, computed on the device
    with a clamp (no Python branch on the norm's value), so a CUDA step never waits for the
    GPU here. Gradients on one device go to the backend's ``clip_norm_many`` in one call
    (a multi-tensor kernel on torch).

    Returns:
        The global norm before clipping (on the first gradient's device), or ``None`` when
        ``grads`` is empty.
    """
    items = list(grads.items())
    if not items:
        return None
    dev = items[0][1]._hardware
    if all(g._hardware is dev for _, g in items):
        new, norm = dev.b.clip_norm_many([g._raw for _, g in items], float(max_norm), float(eps))
        for (pid, _), g in zip(items, new):
            grads._grads[pid] = from_raw(g, dev)
        return from_raw(norm, dev)
    sq = None
    for _, g in items:
        s = (g * g).sum()
        # add on the first gradient's device so that only one value crosses devices
        if sq is None:
            sq = s
        else:
            sq = sq + (s if s._hardware is sq._hardware else s.to_device(sq._hardware))
    assert sq is not None
    total = sq.sqrt()
    # min(1, max_norm / (norm + eps)) as tensor ops: a factor of 1 leaves a gradient unchanged
    factor = (max_norm / (total + eps)).clamp(None, 1.0)
    cast: dict[tuple[object, object], Tensor] = {}
    for pid, g in items:
        key = (g._hardware, g.dtype)
        f = cast.get(key)
        if f is None:
            f = factor if factor._hardware is g._hardware else factor.to_device(g._hardware)
            f = f if f.dtype is g.dtype else f.cast(g.dtype)
            cast[key] = f
        grads._grads[pid] = g * f
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
        _clip_grad_norm_on_device(grads, self.limit)
        return grads

    def __repr__(self) -> str:
        return f"GradientClipping.{self.kind}({self.limit})"
