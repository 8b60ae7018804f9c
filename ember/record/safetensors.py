"""Module state in safetensors files: parameters, buffers and parameter ids."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ..nn.param import ParamId
from .errors import RecordError
from .io import atomic_write, decode, encode, read_bytes

if TYPE_CHECKING:
    from ..nn.module import Module

MODULE_FORMAT = "ember.module"


def save_module(module: Module, path: str | os.PathLike[str]) -> None:
    """Write ``module.state_dict()`` and its parameter ids to ``path`` atomically.

    The file is a plain safetensors file, readable by any safetensors loader (PyTorch too).
    """
    meta = {"format": MODULE_FORMAT, "version": "1", "param_ids": _dump_ids(module)}
    atomic_write(path, encode(module.state_dict(), meta))


def _dump_ids(module: Module) -> str:
    """The ``param_ids`` metadata: JSON of dotted name -> ``str(ParamId)``."""
    return json.dumps({name: str(p.id) for name, p in module.named_parameters()})


def _parse_ids(op: str, meta: dict[str, str]) -> dict[str, ParamId] | None:
    """The ids written by ``_dump_ids`` (``None`` when the file has none)."""
    text = meta.get("param_ids")
    if text is None:
        return None
    try:
        return {k: ParamId.parse(v) for k, v in json.loads(text).items()}
    except (ValueError, AttributeError) as e:
        raise RecordError(f"{op}: the file's param_ids metadata is damaged ({e}).") from None


def load_module(module: Module, path: str | os.PathLike[str], *, strict: bool = True) -> Module:
    """Load a safetensors file into ``module`` in place (ids restored when the file has them).

    Raises:
        RecordError: The file is missing, truncated or corrupted, or names differ.
        ShapeError, DTypeError: Shapes or dtypes differ (every mismatch is listed).
    """
    arrays, meta = decode("load", path, read_bytes("load", path))
    if meta.get("format") not in (None, MODULE_FORMAT):
        raise RecordError(
            f"load: {os.fspath(path)!r} holds a {meta.get('format')!r} record, not module state. "
            "Use em.record.load_training for training records."
        )
    return module.load_state_dict(arrays, strict=strict, ids=_parse_ids("load", meta))
