"""Devices: hardware identity (backend + placement) plus a default autodiff context."""

from __future__ import annotations

import os

from ..backend.base import Backend
from ..backend.registry import get_backend
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..errors import AutodiffError, DeviceError

_Strategy = GradientCheckpointingStrategy
_PLAIN: dict[tuple[str, str], Device] = {}


class Device:
    """Where tensors live, and the autodiff context new tensors get there.

    ``Device.cpu()`` is the NumPy backend; ``Device.torch("cpu" | "cuda" | "cuda:1")`` and
    ``Device.cuda(i)`` use PyTorch tensors as storage. Equality and hash compare hardware only
    (backend and placement); the autodiff setting and strategy are ignored.

    Example:
        >>> d = Device.cpu().autodiff()
        >>> d.is_autodiff(), d == Device.cpu()
        (True, True)
    """

    __slots__ = ("_plain", "_strategy", "b", "backend_name", "where")
    b: Backend  # the shared backend instance (its kernel table is ``b.table``)

    def __init__(self, backend_name: str, where: str, strategy: _Strategy | None = None) -> None:
        self.backend_name = backend_name
        self.where = where
        self._strategy = strategy
        self._plain: Device = self

    @staticmethod
    def _hardware(backend_name: str, where: str) -> Device:
        key = (backend_name, where)
        dev = _PLAIN.get(key)
        if dev is None:
            b = get_backend(backend_name, where)
            dev = Device(backend_name, where)
            dev.b = b
            _PLAIN[key] = dev
        return dev

    # ------------------------------------------------------------------ constructors
    @staticmethod
    def cpu() -> Device:
        """The NumPy backend (the embedded default)."""
        return Device._hardware("numpy", "cpu")

    @staticmethod
    def torch(where: str = "cpu") -> Device:
        """PyTorch tensors as storage on ``"cpu"``, ``"cuda"`` or ``"cuda:i"``."""
        if not isinstance(where, str):
            raise DeviceError(f"Device.torch: expected 'cpu', 'cuda' or 'cuda:i', got {where!r}.")
        if where == "cuda":
            where = "cuda:0"
        ok = where == "cpu" or (where.startswith("cuda:") and where[5:].isdigit())
        if not ok:
            raise DeviceError(
                f"Device.torch: expected 'cpu', 'cuda' or 'cuda:i', got {where!r}. "
                "Example: Device.torch('cuda:0')."
            )
        return Device._hardware("torch", where)

    @staticmethod
    def cuda(index: int = 0) -> Device:
        """Same as ``Device.torch(f"cuda:{index}")``."""
        return Device.torch(f"cuda:{index}")

    # ------------------------------------------------------------------ autodiff context
    def autodiff(self) -> Device:
        """This device with autodiff (strategy ``Disabled``); an autodiff device is unchanged."""
        if self._strategy is not None:
            return self
        return self._with(_Strategy.Disabled)

    def gradient_checkpointing(
        self,
        budget: _Strategy | int | float | None = None,
        *,
        bytes: int | None = None,
        fraction: float | None = None,
    ) -> Device:
        """This autodiff device with strategy ``Balanced``, or a memory budget: ``budget=`` an
        int (bytes), a float (fraction of the Disabled peak) or a ``budget(...)`` strategy, or
        ``bytes=`` / ``fraction=`` as ``GradientCheckpointingStrategy.budget`` takes them."""
        if self._strategy is None:
            raise AutodiffError(
                "gradient_checkpointing: expected an autodiff device, got plain "
                f"{self!r}. Call .autodiff() first: device.autodiff().gradient_checkpointing()."
            )
        if budget is None and bytes is None and fraction is None:
            return self._with(_Strategy.Balanced)
        if isinstance(budget, _Strategy):
            if bytes is not None or fraction is not None:
                raise AutodiffError(
                    "gradient_checkpointing: expected budget= or bytes=/fraction=, got both. "
                    "Hint: gradient_checkpointing(fraction=0.4)."
                )
            return self._with(budget)
        if budget is not None:
            if bytes is not None or fraction is not None:
                raise AutodiffError(
                    "gradient_checkpointing: expected budget= or bytes=/fraction=, got both. "
                    "Hint: gradient_checkpointing(fraction=0.4)."
                )
            if isinstance(budget, float):
                fraction = budget
            else:
                bytes = budget
        return self._with(_Strategy.budget(bytes=bytes, fraction=fraction))

    def without_autodiff(self) -> Device:
        """The plain device (idempotent)."""
        return self._plain

    def is_autodiff(self) -> bool:
        return self._strategy is not None

    def gradient_checkpointing_strategy(self) -> _Strategy | None:
        return self._strategy

    def _with(self, strategy: _Strategy | None) -> Device:
        if strategy is None:
            return self._plain
        d = Device(self.backend_name, self.where, strategy)
        d._plain = self._plain
        d.b = self._plain.b
        return d

    # ------------------------------------------------------------------ identity
    @property
    def is_cuda(self) -> bool:
        return self.where.startswith("cuda")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self._plain is other._plain

    def __hash__(self) -> int:
        return hash((self.backend_name, self.where))

    def __str__(self) -> str:
        return "cpu" if self.backend_name == "numpy" else f"torch:{self.where}"

    def __repr__(self) -> str:
        base = "Device.cpu()" if self.backend_name == "numpy" else f"Device.torch({self.where!r})"
        if self._strategy is None:
            return base
        if self._strategy == _Strategy.Balanced:
            return base + ".autodiff().gradient_checkpointing()"
        if self._strategy.budgeted:
            return base + f".autodiff().gradient_checkpointing(budget={self._strategy!r})"
        return base + ".autodiff()"


def parse_device(spec: str) -> Device:
    """Parse ``"cpu"``, ``"torch:cpu"``, ``"cuda"``, ``"cuda:1"``, ``"torch:cuda:1"``."""
    s = spec.strip().lower()
    if s in ("cpu", "numpy"):
        return Device.cpu()
    if s.startswith("torch:"):
        return Device.torch(s[len("torch:") :])
    if s == "cuda" or s.startswith("cuda:"):
        return Device.torch(s)
    raise DeviceError(
        f"device: expected 'cpu', 'torch:cpu', 'cuda' or 'cuda:i', got {spec!r}. "
        "Set EMBER_DEVICE or --device to one of those."
    )


def default_device() -> Device:
    """``EMBER_DEVICE`` ("cpu", "torch:cpu", "cuda", "cuda:1"), else the NumPy CPU device."""
    spec = os.environ.get("EMBER_DEVICE")
    return parse_device(spec) if spec else Device.cpu()
