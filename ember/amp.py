"""Mixed precision: matmul, convolution and attention in bfloat16 or float16, the rest in float32.

Parameters and optimizer state stay float32. Each op's row says what autocast does with it
(``OpSpec.precision``, read here and nowhere else): inside ``autocast(dtype)`` every ``LOW`` row
casts its float inputs to ``dtype`` (the casts are ops of the graph, so the gradients reaching
float32 parameters are float32), and every ``FULL`` row (softmax, normalisation, losses) casts
low-precision inputs up to float32. The cross-entropy rows are ``KEEP``: they read
low-precision logits directly, compute in float32 inside the kernel and return a float32 loss, so
no float32 copy of the (often largest) logits tensor is made or kept, and the logits' gradient
comes back in their own dtype. An elementwise ``FOLLOW`` op between a low-precision tensor and a
smaller float32 operand that broadcasts over it (a bias) runs in low precision, as a fused
``addmm`` bias would; two full-size operands of different precision (a residual stream) promote to
float32 as usual. Backward kernels run in the dtype their
forward used. float16 needs loss scaling (``GradScaler``); bfloat16 does not.

The policy belongs to the thread (and asyncio task) that entered ``autocast``: it is a context
variable, as in ``torch.autocast``, so another thread's ops keep their own dtypes and a new
thread starts outside autocast. It applies to every backend and pays off on CUDA, whose tensor
cores run bfloat16 and float16 matrix products many times faster than float32.

Example:
    >>> import ember as em
    >>> from ember import amp
    >>> x = em.Tensor.ones((2, 4))
    >>> w = em.Tensor.ones((3, 4))
    >>> with amp.autocast(em.bfloat16):
    ...     y = em.nn.functional.linear(x, w)
    >>> y.dtype
    ember.bfloat16

fp16 training with loss scaling::

    scaler = amp.GradScaler()
    with amp.autocast(em.float16):
        loss = em.nn.functional.cross_entropy(model(x), y)
    grads = em.optim.GradientsParams.from_grads(scaler.scale(loss).backward(), model)
    model = scaler.step(optim, 1e-3, model, grads)   # skips the step on inf/NaN gradients
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._core import dispatch
from ._core.tensor import Tensor
from .dtype import DType, as_dtype, bfloat16, float16, float32
from .errors import DTypeError
from .ops.registry import Precision

if TYPE_CHECKING:
    from .nn.module import Module
    from .optim.base import Optimizer
    from .optim.grads import GradientsParams

_LOW = Precision.LOW
_FULL = Precision.FULL
_FOLLOW = Precision.FOLLOW


class Policy:
    """Which dtype each op computes in while ``autocast`` is active.

    What an op does is its row's ``precision`` (``ember.ops.registry.Precision``): ``LOW`` rows
    (matmul, linear, convolutions, attention) cast float operands to ``dtype``, ``FULL`` rows
    (softmax, normalisation, most losses) cast float16/bfloat16 operands up to float32,
    ``FOLLOW`` rows (add, sub, mul, div) bring a smaller float32 operand (a bias) to the
    low-precision operand's dtype, ``KEEP`` rows run in their operands' dtypes.

    Args:
        dtype: ``em.bfloat16`` or ``em.float16``: the compute dtype of ``LOW`` rows.
    """

    def __init__(self, dtype: DType) -> None:
        d = as_dtype(dtype)
        if d is not bfloat16 and d is not float16:
            raise DTypeError(
                f"autocast: expected em.bfloat16 or em.float16 as the compute dtype, got "
                f"{d.name}. Outside autocast everything runs in the tensors' own dtypes."
            )
        self.dtype = d

    def __call__(self, spec: Any, xs: Sequence[Tensor]) -> Any:
        """The operands of ``spec`` cast to the dtypes this policy computes it in."""
        p = spec.precision
        if p is _LOW:
            # 0-d operands of these rows are "none" placeholders (no bias, no mask): left as
            # they are, so no cast runs for them
            low = self.dtype
            return _cast_floats(xs, low, lambda d: d is not low, keep_scalars=True)
        if p is _FULL:
            return _cast_floats(xs, float32, lambda d: d is self.dtype)
        if p is _FOLLOW and len(xs) == 2:
            a, c = xs
            da, dc = a.dtype, c.dtype
            low = self.dtype
            if da is low and dc is float32 and c.numel() < a.numel():
                return a, dispatch.cast(c, low)
            if dc is low and da is float32 and a.numel() < c.numel():
                return dispatch.cast(a, low), c
        return xs

    def __repr__(self) -> str:
        return f"amp.Policy({self.dtype!r})"


def _cast_floats(xs: Sequence[Tensor], to: DType, want: Any, keep_scalars: bool = False) -> Any:
    out = [
        dispatch.cast(x, to)
        if x.dtype.is_float and want(x.dtype) and not (keep_scalars and x._raw.ndim == 0)
        else x
        for x in xs
    ]
    return out if isinstance(xs, list) else tuple(out)


def current_policy() -> Policy | None:
    """The active policy, or ``None`` outside ``autocast``."""
    hook = dispatch.autocast_policy()
    return hook if isinstance(hook, Policy) else None


@contextmanager
def autocast(dtype: DType | Policy = bfloat16, enabled: bool = True) -> Iterator[Policy | None]:
    """Run the calling thread's ops in the block under a mixed-precision ``Policy``.

    The policy is the calling thread's (and task's) alone, never other threads'; blocks nest and
    each restores the policy it found on exit.

    Args:
        dtype: ``em.bfloat16`` (default) or ``em.float16``, or a ready ``Policy``.
        enabled: ``False`` runs the block in full precision (handy for a command-line switch).

    Yields:
        The active policy (``None`` when disabled).
    """
    policy = None
    if enabled:
        policy = dtype if isinstance(dtype, Policy) else Policy(dtype)
    previous = dispatch.set_autocast(policy)
    try:
        yield policy
    finally:
        dispatch.set_autocast(previous)


class GradScaler:
    """Dynamic loss scaling for float16 training (bfloat16 needs none).

    The loss is multiplied by ``scale`` before backward so small float16 gradients do not flush
    to zero; ``step`` divides the gradients by it, skips the update when any gradient is inf or
    NaN, and adapts the scale: times ``backoff_factor`` after an overflow, times
    ``growth_factor`` after ``growth_interval`` clean steps. The finiteness check reads one
    scalar back from the device per step.

    Example:
        >>> scaler = GradScaler(init_scale=1024.0)
        >>> scaler.scale(em.tensor(2.0)).item()
        2048.0
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        if init_scale <= 0 or growth_factor <= 1 or not 0 < backoff_factor < 1:
            raise ValueError(
                "GradScaler: expected init_scale > 0, growth_factor > 1 and 0 < backoff_factor "
                f"< 1, got {init_scale}, {growth_factor}, {backoff_factor}."
            )
        self.scale_value = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._clean_steps = 0

    def scale(self, loss: Tensor) -> Tensor:
        """``loss * scale``, computed in float32 (call ``backward()`` on the result)."""
        if loss.dtype is not float32:
            loss = loss.cast(float32)
        return loss * self.scale_value

    def unscale(self, grads: GradientsParams) -> bool:
        """Divide every gradient in ``grads`` by the scale; ``True`` when all are finite."""
        inv = 1.0 / self.scale_value
        probe: Tensor | None = None
        for pid, g in grads.items():
            g = g * inv
            grads.register(pid, g)
            # g * 0 is 0 where g is finite and NaN where it is inf or NaN
            s = (g * 0.0).sum().cast(float32)
            probe = s if probe is None else probe + s.to_device(probe.device)
        return probe is None or math.isfinite(float(probe.item()))

    def update(self, finite: bool) -> None:
        """Adapt the scale after a step whose gradients were (or were not) all finite."""
        if not finite:
            self.scale_value *= self.backoff_factor
            self._clean_steps = 0
            return
        self._clean_steps += 1
        if self._clean_steps >= self.growth_interval:
            self.scale_value *= self.growth_factor
            self._clean_steps = 0

    def step(self, optim: Optimizer, lr: float, module: Module, grads: GradientsParams) -> Module:
        """Unscale ``grads``, run ``optim.step`` unless a gradient overflowed, update the scale."""
        finite = self.unscale(grads)
        if finite:
            module = optim.step(lr, module, grads)
        self.update(finite)
        return module
