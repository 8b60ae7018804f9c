"""Random state: ``Generator`` (a stream of its own) and the default generators' state.

Every backend instance (NumPy, torch CPU, each CUDA device) owns a default generator, seeded by
``em.seed``; ``Tensor.random``, dropout and shuffling draw from it. ``get_rng_state()`` captures
all of them as JSON-ready data and ``set_rng_state(state)`` puts them back, so draws after the
restore repeat the draws after the capture (training records store it: a resumed run with
dropout continues bit for bit). A ``Generator(seed)`` is an independent stream, passed to a
random op as ``generator=``; it never touches the default generators.

Example:
    >>> g = em.Generator(7)
    >>> a = em.Tensor.random((3,), em.Distribution.uniform(), generator=g)
    >>> g.manual_seed(7)
    >>> b = em.Tensor.random((3,), em.Distribution.uniform(), generator=g)
    >>> bool((a == b).all().item())
    True
"""

from __future__ import annotations

import threading
from typing import Any

from ._core import checks
from .backend.base import Backend
from .backend.registry import get_backend, loaded_backends
from .errors import DTypeError, ShapeError

RngState = dict[str, Any]
_SEED_HI = (1 << 64) - 1


def _key(b: Backend) -> str:
    """A backend's key in an RNG state: registry name and placement (``"torch:cuda:0"``)."""
    return f"{b.name}:{b.placement}"


def _check_seed(op: str, n: int) -> int:
    return checks.int_arg(op, "seed", n, lo=0, hi=_SEED_HI)


class Generator:
    """An independent random stream, seeded once, for random ops' ``generator=`` argument.

    It keeps one private generator per backend it draws on (NumPy, torch CPU, each CUDA
    device), each seeded with ``seed`` when first used, so the numbers a ``Generator(seed)``
    gives on one device never depend on what other devices or the default generators did.
    Not shared between threads (as ``torch.Generator``): give each thread its own.

    Args:
        seed: A non-negative integer below 2**64.
    """

    __slots__ = ("_initial", "_lock", "_streams")

    def __init__(self, seed: int = 0) -> None:
        self._initial = _check_seed("Generator", seed)
        self._streams: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def manual_seed(self, seed: int) -> Generator:
        """Restart every stream from ``seed``; returns the generator (as PyTorch)."""
        self._initial = _check_seed("Generator.manual_seed", seed)
        self._streams = {}
        return self

    def initial_seed(self) -> int:
        """The seed the streams started from."""
        return self._initial

    def get_state(self) -> RngState:
        """JSON-ready state: the seed and each used stream's position."""
        return {
            "seed": self._initial,
            "streams": {k: b.rng_state() for k, b in self._streams.items()},
        }

    def set_state(self, state: RngState) -> Generator:
        """Restore a state ``get_state`` returned; returns the generator."""
        seed, streams = _parse(
            "Generator.set_state", state, {"seed": int, "streams": dict}, "g.get_state()"
        )
        self.manual_seed(seed)
        for key, s in streams.items():
            self._stream_for(_backend_of("Generator.set_state", key)).set_rng_state(s)
        return self

    def _stream_for(self, b: Backend) -> Backend:
        """The private backend instance drawing this generator's numbers on ``b``'s device."""
        key = _key(b)
        own = self._streams.get(key)
        if own is None:
            with self._lock:
                own = self._streams.get(key)
                if own is None:
                    own = type(b)(b.placement)  # its own generator; kernel rows load lazily
                    own.seed(self._initial)
                    self._streams[key] = own
        return own

    def __repr__(self) -> str:
        return f"em.Generator(seed={self._initial}, streams={sorted(self._streams)})"


def sampler(b: Backend, generator: Generator | None) -> Backend:
    """What a random op on backend ``b`` draws from: ``generator``'s stream, or ``b`` itself."""
    if generator is None:
        return b
    if not isinstance(generator, Generator):
        raise DTypeError(
            f"random: expected generator to be an em.Generator or None, got "
            f"{type(generator).__name__}. Create one with em.Generator(seed)."
        )
    return generator._stream_for(b)


def get_rng_state() -> RngState:
    """The default generator state of every backend loaded so far (JSON-ready).

    Example:
        >>> state = em.get_rng_state()
        >>> a = em.Tensor.random((2,), em.Distribution.normal())
        >>> em.set_rng_state(state)
        >>> b = em.Tensor.random((2,), em.Distribution.normal())   # the same numbers as a
    """
    return {_key(b): b.rng_state() for b in loaded_backends()}


def set_rng_state(state: RngState) -> None:
    """Restore the default generators from ``get_rng_state()``'s result.

    Backends in ``state`` not loaded yet are created first (so a fresh process resumes
    exactly); one this machine cannot create (no CUDA) raises ``DeviceError``.

    Raises:
        ShapeError: ``state`` is not a state ``get_rng_state`` returned (every bad entry named).
    """
    if not isinstance(state, dict):
        raise DTypeError(
            f"set_rng_state: expected the dict em.get_rng_state() returned, got "
            f"{type(state).__name__}."
        )
    targets = [(_backend_of("set_rng_state", k), s) for k, s in state.items()]
    for b, s in targets:
        try:
            b.set_rng_state(s)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise ShapeError(
                f"set_rng_state: the state of {_key(b)} does not fit its generator "
                f"({type(e).__name__}: {e}). Pass a state em.get_rng_state() returned."
            ) from None


def _backend_of(op: str, key: object) -> Backend:
    """The backend an RNG state key names (``"numpy:cpu"``; ``"NumpyBackend:cpu"`` as earlier
    Learner records wrote it)."""
    name, sep, where = key.partition(":") if isinstance(key, str) else ("", "", "")
    if not sep or not where:
        raise ShapeError(
            f"{op}: expected RNG state keys '<backend>:<placement>' (e.g. 'numpy:cpu'), got "
            f"{key!r}. Pass a state em.get_rng_state() returned."
        )
    for b in loaded_backends():
        if type(b).__name__ == name and b.placement == where:
            return b
    return get_backend(name, where)


def _parse(op: str, state: object, fields: dict[str, type], hint: str) -> list[Any]:
    if not isinstance(state, dict) or any(
        not isinstance(state.get(k), t) or isinstance(state.get(k), bool) for k, t in fields.items()
    ):
        want = ", ".join(f"{k!r} ({t.__name__})" for k, t in fields.items())
        raise ShapeError(
            f"{op}: expected a dict with {want}, got {state!r:.200}. Pass a state {hint} returned."
        )
    return [state[k] for k in fields]
