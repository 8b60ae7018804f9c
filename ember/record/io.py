"""Bytes on disk: checked reads, atomic writes, and safetensors encoding with ember's dtypes.

``safetensors.numpy`` can write bfloat16 but not read it back, so decoding goes through
``safetensors.deserialize`` (which validates the whole file) and a dtype table of our own.
Checksums (the ``checksum`` metadata field) are written and verified in ``checksum.py``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import time
from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

from .._core.tensor import Tensor
from .checksum import add_checksum, verify_checksum
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
_NAMES: dict[np.dtype[Any], str] = {np.dtype(v): k for k, v in _DTYPES.items()}

_MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header
_LEGACY_TMP_AGE_S = 3600.0  # temp files of older ember versions carry no pid: age decides


# ------------------------------------------------------------------ writing
def _tmp_pattern(base: str) -> re.Pattern[str]:
    """Temp names of ``atomic_write``: ``.<base>.<pid>.<16 hex>.tmp`` (group 1: the pid), or the
    pid-less ``.<base>.<8 chars>.tmp`` of ember versions that used ``tempfile.mkstemp``."""
    return re.compile(rf"\.{re.escape(base)}\.(?:(\d+)\.[0-9a-f]{{16}}|[a-z0-9_]{{8}})\.tmp")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be writing it
    try:
        os.kill(pid, 0)  # signal 0: existence check only (POSIX)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def clean_stale_temps(target: str) -> None:
    """Delete temp files that an interrupted ``atomic_write`` of ``target`` left behind: those of
    processes that no longer run (and pid-less ones older than an hour)."""
    if os.name != "posix":  # no cheap, harmless liveness check elsewhere
        return
    folder, base = os.path.split(target)
    pattern = _tmp_pattern(base)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for name in names:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        path = os.path.join(folder, name)
        try:
            if m.group(1) is not None:
                stale = not _pid_alive(int(m.group(1)))
            else:
                stale = now - os.lstat(path).st_mtime > _LEGACY_TMP_AGE_S
            if stale:
                os.unlink(path)
        except OSError:
            continue  # gone already, or not ours to delete


def _create_tmp(target: str) -> tuple[int, str]:
    """A new, exclusive temp file beside ``target``, created with mode 0o666 minus the umask
    (the mode every other file of the run gets)."""
    folder, base = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    while True:
        tmp = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename.

    A crash at any point leaves either the previous file or the complete new one; temp files
    that earlier crashed writes of ``path`` left behind are deleted first. The file's mode
    follows the umask, as ``open()`` would create it.
    """
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    clean_stale_temps(target)
    fd, tmp = _create_tmp(target)
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
    """safetensors bytes for ``tensors`` (any device) with string ``metadata`` plus the
    ``checksum`` field over both."""
    arrays = {}
    for name, t in tensors.items():
        a = t.to_numpy() if isinstance(t, Tensor) else np.asarray(t)
        # np.ascontiguousarray would turn a 0-d array into shape (1,)
        arrays[name] = a if a.flags.c_contiguous else a.copy(order="C")
    meta = add_checksum(arrays, dict(metadata), lambda a: _NAMES.get(a.dtype, str(a.dtype)))
    return bytes(safetensors.numpy.save(arrays, metadata=meta))


# ------------------------------------------------------------------ reading
def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(op: str, where: str, mode: int) -> RecordError:
    return RecordError(
        f"{op}: expected a regular file, got {where!r}, which is {_kind(mode)}. Pass the path "
        "of a record file."
    )


def _damaged(op: str, where: str, why: str) -> RecordError:
    return RecordError(
        f"{op}: {where!r} is not a readable safetensors file ({why}). It is truncated or "
        "corrupted; write it again or load a backup."
    )


def _declared_size(op: str, where: str, head: bytes, size: int, f: Any) -> int:
    """The file size a safetensors header declares (8 + header + the largest data offset)."""
    n = int.from_bytes(head[:8], "little")
    if n > min(size - 8, _MAX_HEADER):
        raise _damaged(op, where, f"its header claims {n} bytes, the file holds {size}")
    try:
        header = json.loads(head[8:] + f.read(n - (len(head) - 8)))
        end = max(
            (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
            default=0,
        )
    except Exception as e:  # any malformed header: the decoder's message, earlier
        raise _damaged(op, where, f"header: {type(e).__name__}: {e}") from None
    return 8 + n + end


def read_bytes(op: str, path: str | os.PathLike[str]) -> bytes:
    """The whole file at ``path``, refusing anything but a regular file.

    A FIFO cannot block the read (checked before and after a non-blocking open), and a
    safetensors file must be exactly as long as its header declares, so a wrong path never
    reads without end.
    """
    where = os.fspath(path)
    try:
        st = os.stat(where)
    except FileNotFoundError:
        raise RecordError(f"{op}: no file at {where!r}. Check the path.") from None
    except OSError as e:
        raise RecordError(f"{op}: cannot read {where!r} ({e.strerror}). Check the path.") from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(op, where, st.st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(where, flags | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise RecordError(f"{op}: cannot open {where!r} ({e.strerror}). Check the path.") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)  # the file actually opened (the path may have been swapped)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(op, where, st.st_mode)
        size = st.st_size
        head = f.read(9)
        if len(head) == 9 and head[8:9] == b"{":  # a safetensors header: 8 length bytes, JSON
            declared = _declared_size(op, where, head, size, f)
            if size > declared:
                raise _damaged(
                    op, where, f"{size - declared} bytes beyond the {declared} its header declares"
                )
            if size < declared:
                raise _damaged(op, where, f"{size} bytes of the {declared} its header declares")
        f.seek(0)
        data = f.read(size)
        if len(data) != size or f.read(1):
            raise RecordError(
                f"{op}: {where!r} changed size while it was read. Another process is writing it "
                "in place; save records with em.record / module.save (atomic) and read again."
            )
    return data


def decode(
    op: str, path: str | os.PathLike[str], data: bytes, *, warn_unchecked: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors (NumPy arrays) and metadata of a safetensors file; ``RecordError`` if damaged.

    The ``checksum`` field is verified when present (and removed from the returned
    metadata); without it a ``RecordWarning`` says so, unless ``warn_unchecked`` is False
    (files of other tools, which never carry it).
    """
    where = os.fspath(path)
    try:
        items = safetensors.deserialize(data)
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
    except Exception as e:  # the Rust error type is not importable by a stable name
        raise _damaged(op, where, str(e)) from None
    raw_meta = header.get("__metadata__") or {}
    meta = {str(k): str(v) for k, v in raw_meta.items()}
    verify_checksum(op, where, items, meta, warn_unchecked=warn_unchecked)
    out: dict[str, np.ndarray] = {}
    for name, info in items:
        dt = _DTYPES.get(info["dtype"])
        if dt is None:
            raise RecordError(
                f"{op}: tensor {name!r} in {where!r} has dtype {info['dtype']}, which ember does "
                f"not read; expected one of {sorted(_DTYPES)}."
            )
        a = np.frombuffer(info["data"], dtype=dt).reshape(info["shape"])  # a writable view
        out[name] = a if a.flags.aligned else a.copy()
    return out, meta
