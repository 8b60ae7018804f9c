"""Bytes on disk: atomic writes and safetensors encoding with ember's dtypes.

``safetensors.numpy`` can write bfloat16 but not read it back, so decoding goes through
``safetensors.deserialize`` (which validates the whole file) and a dtype table of our own.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

from ..tensor.tensor import Tensor
from .errors import RecordError

_DTYPES: dict[str, Any] = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename.

    A crash at any point leaves either the previous file or the complete new one.
    """
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=folder
    )
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)


def encode(tensors: Mapping[str, Tensor | np.ndarray], metadata: Mapping[str, str]) -> bytes:
    """safetensors bytes for ``tensors`` (any device) with string ``metadata``."""
    arrays = {}
    for name, t in tensors.items():
        a = t.to_numpy() if isinstance(t, Tensor) else np.asarray(t)
        # np.ascontiguousarray would turn a 0-d array into shape (1,)
        arrays[name] = a if a.flags.c_contiguous else a.copy(order="C")
    return bytes(safetensors.numpy.save(arrays, metadata=dict(metadata)))


def read_bytes(op: str, path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise RecordError(f"{op}: no file at {os.fspath(path)!r}. Check the path.") from None


def decode(
    op: str, path: str | os.PathLike[str], data: bytes
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors (NumPy arrays) and metadata of a safetensors file; ``RecordError`` if damaged."""
    where = os.fspath(path)
    try:
        items = safetensors.deserialize(data)
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
    except Exception as e:  # the Rust error type is not importable by a stable name
        raise RecordError(
            f"{op}: {where!r} is not a readable safetensors file ({e}). It is truncated or "
            "corrupted; write it again or load a backup."
        ) from None
    out: dict[str, np.ndarray] = {}
    for name, info in items:
        dt = _DTYPES.get(info["dtype"])
        if dt is None:
            raise RecordError(
                f"{op}: tensor {name!r} in {where!r} has dtype {info['dtype']}, which ember does "
                f"not read; expected one of {sorted(_DTYPES)}."
            )
        out[name] = np.frombuffer(bytes(info["data"]), dtype=dt).reshape(info["shape"]).copy()
    meta = header.get("__metadata__") or {}
    return out, {str(k): str(v) for k, v in meta.items()}
