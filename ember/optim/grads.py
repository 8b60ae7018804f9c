"""Parameter-keyed gradients: ``GradientsParams`` and ``GradientsAccumulator`` (SEMANTICS §9)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .._core.device import Device
from .._core.tensor import Tensor
from ..autodiff.gradients import Gradients
from ..errors import AutodiffError, DTypeError
from ..nn.param import ParamId

if TYPE_CHECKING:
    from ..nn.module import Module


class GradientsParams:
    """Gradients keyed by ``ParamId``: what optimizers consume.

    Example:
        >>> grads = GradientsParams.from_grads(loss.backward(), model)
        >>> model = optim.step(1e-3, model, grads)
    """

    __slots__ = ("_grads",)

    def __init__(self) -> None:
        self._grads: dict[ParamId, Tensor] = {}

    @staticmethod
    def from_grads(grads: Gradients, module: Module) -> GradientsParams:
        """Move each require-grad parameter's gradient out of ``grads`` (node-keyed)."""
        if not isinstance(grads, Gradients):
            raise DTypeError(
                f"GradientsParams.from_grads: expected the Gradients returned by "
                f"loss.backward(), got {type(grads).__name__}."
            )
        out = GradientsParams()
        for p in module.parameters():
            g = p.val().grad_remove(grads)
            if g is not None:
                out._grads[p.id] = g
        return out

    def get(self, param_id: ParamId) -> Tensor | None:
        """The gradient of ``param_id``, or ``None``."""
        return self._grads.get(param_id)

    def remove(self, param_id: ParamId) -> Tensor | None:
        """Pop the gradient of ``param_id`` (``None`` if absent)."""
        return self._grads.pop(param_id, None)

    def register(self, param_id: ParamId, grad: Tensor) -> None:
        """Set the gradient of ``param_id`` to the plain tensor ``grad``."""
        if grad.is_autodiff():
            raise AutodiffError(
                "GradientsParams.register: expected a plain gradient, got an autodiff tensor. "
                "Pass grad.without_autodiff()."
            )
        self._grads[param_id] = grad

    def to_device(self, device: Device, module: Module) -> GradientsParams:
        """A container whose gradients of ``module``'s parameters are moved to ``device``."""
        plain = device.without_autodiff()
        out = GradientsParams()
        for p in module.parameters():
            g = self._grads.get(p.id)
            if g is not None:
                out._grads[p.id] = g.to_device(plain)
        return out

    def ids(self) -> list[ParamId]:
        return list(self._grads)

    def items(self) -> Iterator[tuple[ParamId, Tensor]]:
        return iter(list(self._grads.items()))

    def __len__(self) -> int:
        return len(self._grads)

    def __contains__(self, param_id: object) -> bool:
        return param_id in self._grads

    def __repr__(self) -> str:
        return f"GradientsParams({len(self._grads)} tensors)"


class GradientsAccumulator:
    """Sums ``GradientsParams`` of several backward passes, per ``ParamId``.

    Example:
        >>> acc = GradientsAccumulator()
        >>> for x, y in micro_batches:
        ...     grads = loss(model, x, y).backward()
        ...     acc.accumulate(model, GradientsParams.from_grads(grads, model))
        >>> model = optim.step(lr, model, acc.grads())
    """

    __slots__ = ("_sum",)

    def __init__(self) -> None:
        self._sum = GradientsParams()

    def accumulate(self, module: Module, grads: GradientsParams) -> None:
        """Add ``grads`` of ``module``'s parameters (consumed) to the running sum."""
        store = self._sum._grads
        for p in module.parameters():
            g = grads.remove(p.id)
            if g is None:
                continue
            acc = store.get(p.id)
            if acc is None:
                store[p.id] = g
            else:
                store[p.id] = acc + (g if g._hardware is acc._hardware else g.to_device(acc.device))

    def grads(self) -> GradientsParams:
        """The sum so far; the accumulator starts again from empty."""
        out, self._sum = self._sum, GradientsParams()
        return out

    def __len__(self) -> int:
        return len(self._sum)
