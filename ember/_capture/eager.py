"""The eager path: the NumPy and torch-CPU backends, warm-up calls, and ``fallback=True``.

On a CPU backend a captured call is the eager call under the host-read guard, so it has the same
results and the same cost as eager code (plus the signature: one walk over the arguments), and
a function that works here works under a CUDA recording too. (Replaying a recorded kernel
sequence without the per-op dispatch was not built: eager dispatch is what the CPU backends run.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, cast

from .._core.device import Device
from .guard import guarded


def run_eager(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    *,
    note: bool,
    device: Device | None = None,
) -> tuple[Any, list[str]]:
    """``fn(*args, **kwargs)`` under the guard; returns the result and the host reads noted
    (``note=True``; otherwise the first host read raises ``CaptureError``). On a CUDA device the
    call runs on the device's capture stream (a warm-up before recording, as CUDA graphs want)."""
    with _side_stream(device), guarded(name, note=note) as reads:
        out = fn(*args, **kwargs)
    return out, reads.ops


@contextmanager
def _side_stream(device: Device | None) -> Iterator[None]:
    if device is None or not device.is_cuda:
        with nullcontext():
            yield
        return
    import torch

    index = cast(Any, device.b).rng.device  # the torch backend's generator: its device
    main = torch.cuda.current_stream(index)
    side = capture_stream(index)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        yield
    main.wait_stream(side)


_STREAMS: dict[Any, Any] = {}


def capture_stream(index: Any) -> Any:
    """The one side stream per CUDA device that warm-ups and recordings run on. One stream, not
    a new one per call: cuBLAS keeps a workspace per stream (32 MiB on an H200), so every new
    stream would add one to the step's peak."""
    import torch

    s = _STREAMS.get(index)
    if s is None:
        s = _STREAMS[index] = torch.cuda.Stream(device=index)
    return s


def warn_eager(name: str, ops: list[str]) -> None:
    """The one warning of ``fallback=True``: this function runs eagerly from now on."""
    warnings.warn(
        f"capture: {name} reads device values on the host ({', '.join(sorted(set(ops)))}); "
        "it cannot be captured and runs eagerly (fallback=True). Move the read after the call "
        "to capture it.",
        RuntimeWarning,
        stacklevel=4,
    )
