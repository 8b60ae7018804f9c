"""The backend contract: ``Backend``, every method a backend provides, split by kernel family.

A backend works on its own array type (``Raw``: ``np.ndarray`` for NumPy, ``torch.Tensor`` for
PyTorch) and trusts its inputs: shapes, dims and dtypes were checked by ``ember._core.checks``.
Abstract methods are the kernels every backend implements; ``OptionalKernels`` adds
multi-tensor kernels with per-tensor defaults that a backend may override. A backend declares
no public method the base does not (``tests/unit/backend/test_contract.py`` holds that).

Each backend owns its ``table``: op name -> the callable computing that op's forward here,
resolved on first use from the registry rows (``ember.ops.registry`` hands them over with
``install_rows``: the backend layer imports nothing above it).

Example:
    >>> from ember.backend.registry import get_backend
    >>> b = get_backend("numpy")
    >>> isinstance(b, Backend), b.table["add"] is b.add
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import ClassVar, Protocol

from .families.activation import ActivationOps
from .families.linalg import LinalgOps
from .families.nn import NnOps
from .families.optional import OptionalKernels
from .families.random import RandomOps
from .families.types import Key, Pair, Raw, RngState, Shape

__all__ = ["Backend", "KernelTable", "Key", "Pair", "Raw", "RngState", "Shape", "install_rows"]


class _Row(Protocol):
    """What the table reads from a registry row: a forward ``f(backend, *args)``, or None for
    "the backend method of the row's name"."""

    @property
    def forward(self) -> Callable[..., Raw] | None: ...


_ROWS: list[Mapping[str, _Row]] = [{}]  # the registry's rows (one mapping, replaced once)


def install_rows(rows: Mapping[str, _Row]) -> None:
    """Give every kernel table the op rows (``ember.ops.registry`` calls it with ``OPS``)."""
    _ROWS[0] = rows


class KernelTable(dict[str, Callable[..., Raw]]):
    """A backend's op name -> forward callable, filled on first use of each name.

    Forwards are called as ``fn(*raw_inputs, **attrs)``: a row's own ``forward`` bound to the
    backend, else the backend method of the row's name (the contract test checks that the base
    class declares it, with parameters named as the row's attrs).
    """

    __slots__ = ("backend",)

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend

    def __missing__(self, name: str) -> Callable[..., Raw]:
        forward = _ROWS[0][name].forward
        fn = getattr(self.backend, name) if forward is None else partial(forward, self.backend)
        self[name] = fn
        return fn


class Backend(RandomOps, ActivationOps, NnOps, LinalgOps, OptionalKernels):
    """A backend placed at ``where`` ("cpu", "cuda:0"...), with its own kernel table.

    Families: ``StorageOps``, ``RandomOps``, ``ElementwiseOps``, ``ReduceOps``, ``LayoutOps``,
    ``IndexOps``, ``LinalgOps``, ``ActivationOps``, ``NnOps`` and ``OptionalKernels``
    (``ember/backend/families/``).
    """

    name: ClassVar[str]
    array_type: ClassVar[type]
    # what ranks a memory budget's drops (ember/checkpoint/cost.py): flop-equivalents of one
    # element read or written, and of running one op, on this backend's device
    pass_cost: float = 8.0
    op_cost: float = 0.0

    def __init__(self, where: str = "cpu") -> None:
        self.placement = where
        self.table = KernelTable(self)
