"""Backend registry: a name -> backend class table filled by ``@register_backend``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import DeviceError
from .base import Backend

B = TypeVar("B", bound=type[Backend])
_BACKENDS: dict[str, type[Backend]] = {}
_INSTANCES: dict[tuple[str, str], Backend] = {}
_SEED: list[int | None] = [None]  # the last em.seed, applied to backends created after it


def register_backend(name: str) -> Callable[[B], B]:
    """Class decorator adding a ``Backend`` subclass under ``name``."""

    def wrap(cls: B) -> B:
        _BACKENDS[name] = cls
        return cls

    return wrap


def get_backend(name: str, where: str = "cpu") -> Backend:
    """The shared backend instance for ``name`` placed at ``where`` ("cpu", "cuda:0"...)."""
    key = (name, where)
    inst = _INSTANCES.get(key)
    if inst is None:
        if name not in _BACKENDS:
            _load(name)
        inst = _INSTANCES[key] = _BACKENDS[name](where)
        if _SEED[0] is not None:
            inst.seed(_SEED[0])  # a device first used after em.seed is reproducible too
    return inst


def seed_all(n: int) -> None:
    """Seed every backend created so far, and every one created later, with ``n``."""
    _SEED[0] = n
    for inst in _INSTANCES.values():
        inst.seed(n)


def _load(name: str) -> None:
    if name == "numpy":
        from .numpy import backend  # noqa: F401
    elif name == "torch":
        try:
            from .torch import backend as _tb  # noqa: F401
        except ImportError as e:
            raise DeviceError(
                f"Device.torch: the PyTorch backend is not available ({e}). "
                "Install it with `pip install 'ember[torch]'`."
            ) from e
    if name not in _BACKENDS:
        raise DeviceError(f"backend: no backend named {name!r}; known: {sorted(_BACKENDS)}.")


def loaded_backends() -> list[Backend]:
    """Backend instances created so far (used by ``em.seed``)."""
    return list(_INSTANCES.values())
