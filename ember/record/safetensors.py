"""Module state in safetensors files: parameters, buffers and parameter ids."""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from ..nn.param import ParamId
from . import quantized as _quantized
from .checksum import CHECKED_VERSION
from .errors import RecordError
from .io import atomic_write, decode, encode, read_bytes

if TYPE_CHECKING:
    from ..nn.module import Module

MODULE_FORMAT = "ember.module"
_HEX16 = re.compile(r"[0-9a-f]{16}")


def save_module(module: Module, path: str | os.PathLike[str]) -> None:
    """Write ``module.state_dict()`` and its parameter ids to ``path`` atomically.

    The file is a plain safetensors file, readable by any safetensors loader (PyTorch too).
    """
    meta = {"format": MODULE_FORMAT, "version": CHECKED_VERSION, "param_ids": _dump_ids(module)}
    state, quantized = _quantized.split(module.state_dict())
    if quantized:  # int8 values + scales as tensors, their schemes here (record/quantized.py)
        meta[_quantized.META] = json.dumps(quantized)
    atomic_write(path, encode(state, meta))


def _dump_ids(module: Module) -> str:
    """The ``param_ids`` metadata: JSON of dotted name -> ``str(ParamId)``."""
    return json.dumps({name: str(p.id) for name, p in module.named_parameters()})


def _parse_ids(op: str, meta: dict[str, str]) -> dict[str, ParamId] | None:
    """The ids written by ``_dump_ids`` (``None`` when the file has none); ``RecordError`` when
    the field is malformed or two parameters share an id (they would share one gradient)."""
    text = meta.get("param_ids")
    if text is None:
        return None
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
        bad = [k for k, v in raw.items() if not (isinstance(v, str) and _HEX16.fullmatch(v))]
        if bad:
            raise ValueError(f"ids of {bad} are not 16 hex digits")
        ids = {k: ParamId.parse(v) for k, v in raw.items()}
    except ValueError as e:
        raise RecordError(
            f"{op}: the file's param_ids metadata is damaged ({e}). Write the record again or "
            "load a backup."
        ) from None
    seen: dict[ParamId, str] = {}
    shared = []
    for name, pid in ids.items():
        if pid in seen:
            shared.append(f"{seen[pid]} and {name} ({pid})")
        seen.setdefault(pid, name)
    if shared:
        raise RecordError(
            f"{op}: the file's param_ids give two parameters one id: {'; '.join(shared)}. Ids "
            "key gradients and optimizer state, so each must be unique; the file is damaged or "
            "was edited."
        )
    return ids


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
    ids = _parse_ids("load", meta)
    arrays, quantized = _quantized.join("load", os.fspath(path), arrays, meta)
    if not quantized:
        return module.load_state_dict(arrays, strict=strict, ids=ids)
    return _load_quantized(module, arrays, quantized, strict, ids)


def _load_quantized(
    module: Module,
    arrays: dict[str, Any],
    quantized: dict[str, Any],
    strict: bool,
    ids: dict[str, ParamId] | None,
) -> Module:
    """Load a record with quantized weights: each goes into its parameter as a frozen
    ``QuantizedTensor`` (a float model becomes a quantized one), the rest as usual."""
    from ..errors import DTypeError, ShapeError
    from ..quantization.model import frozen_in

    params = dict(module.named_parameters())
    bad = [n for n in quantized if n not in params]
    if bad:
        raise RecordError(
            f"load: the record holds quantized weights {bad} that {type(module).__name__} has "
            "no parameters for. Load it into the model it was saved from."
        )
    for name, q in quantized.items():
        p = params[name]
        v: Any = p.val()  # a Tensor, or a QuantizedTensor when the model is quantized already
        want = v.float_dtype if v.is_quantized() else v.dtype
        if q.shape != p.shape:
            raise ShapeError(f"load: {name}: expected shape {p.shape}, got {q.shape}.")
        if q.float_dtype is not want:
            raise DTypeError(
                f"load: {name}: expected weights of {want.name}, got {q.float_dtype.name}."
            )
    if strict:
        expected = set(params) | {n for n, _ in module.named_buffers()}
        tied = module._tied_names()
        missing = [n for n in expected if n not in arrays and n not in quantized and n not in tied]
        unexpected = [n for n in arrays if n not in expected]
        if missing or unexpected:
            raise RecordError(
                f"load: names differ from {type(module).__name__}'s; missing: "
                f"{missing or 'none'}; unexpected: {unexpected or 'none'}. Check the layer "
                "names or pass strict=False."
            )
    module.load_state_dict(arrays, strict=False, ids=ids)
    for name, q in quantized.items():
        p = params[name]
        frozen_in(p, q.to_device(p.val().device.without_autodiff()))
        if ids is not None and name in ids:
            p.id = ids[name]
    return module
