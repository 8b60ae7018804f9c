"""The ``checksum`` metadata field: SHA-256 digests of every tensor and of the metadata.

The field is JSON, ``{"algorithm": "sha256", "metadata": <hex>, "tensors": {<name>: <hex>}}``:

- a tensor's digest covers its name, safetensors dtype, shape and bytes: ``sha256(name NUL
  dtype NUL json(shape) NUL data)``;
- the metadata digest covers every other metadata entry: ``sha256(json(metadata, sorted keys,
  separators "," and ":"))``.

Files ember writes are ``version`` "2" and must carry the field, so a flip that renames it is
caught too: a single flipped bit anywhere in a file fails to parse or fails a check. Files
without the field and without a version above "1" (older ember, other tools) still load, with
a ``RecordWarning``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .errors import RecordError, RecordWarning

FIELD = "checksum"
ALGORITHM = "sha256"
CHECKED_VERSION = "2"  # the record ``version`` from which ember files always carry the field
_UNCHECKED_VERSIONS = (None, "1")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _tensor_digest(name: str, dtype: str, shape: Iterable[int], data: Any) -> str:
    h = hashlib.sha256()
    h.update(f"{name}\0{dtype}\0{json.dumps(list(shape))}\0".encode())
    h.update(data)
    return h.hexdigest()


def _meta_digest(meta: dict[str, str]) -> str:
    rest = {k: v for k, v in meta.items() if k != FIELD}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def add_checksum(
    arrays: dict[str, np.ndarray], meta: dict[str, str], dtype_name: Callable[[np.ndarray], str]
) -> dict[str, str]:
    """``meta`` plus the ``checksum`` field over ``arrays`` (C-contiguous) and ``meta``."""
    tensors = {
        name: _tensor_digest(name, dtype_name(a), a.shape, a.reshape(-1).view(np.uint8))
        for name, a in arrays.items()
    }
    field = {"algorithm": ALGORITHM, "metadata": _meta_digest(meta), "tensors": tensors}
    return {**meta, FIELD: json.dumps(field, separators=(",", ":"))}


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside ember, so a warning names the user's line."""
    frame, level = sys._getframe(1), 1  # the caller's frame: stacklevel 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _field(op: str, where: str, text: str) -> tuple[str, dict[str, str]]:
    try:
        field = json.loads(text)
        meta_digest, tensors = field["metadata"], field["tensors"]
        algorithm = field["algorithm"]
        ok = isinstance(meta_digest, str) and isinstance(tensors, dict)
        ok = ok and all(isinstance(v, str) for v in tensors.values())
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        raise RecordError(
            f"{op}: the checksum field of {where!r} is damaged (expected JSON with 'algorithm', "
            "'metadata' and 'tensors' digests). The file is corrupted; write it again or load "
            "a backup."
        )
    if algorithm != ALGORITHM:
        raise RecordError(
            f"{op}: {where!r} is checksummed with {algorithm!r}; this ember verifies "
            f"{ALGORITHM!r} only. The file is damaged or from a newer ember; upgrade ember."
        )
    return meta_digest, tensors


def verify_checksum(
    op: str,
    where: str,
    items: list[tuple[str, dict[str, Any]]],
    meta: dict[str, str],
    *,
    warn_unchecked: bool = True,
) -> None:
    """Check ``items`` (``safetensors.deserialize`` output) and ``meta`` against the file's
    ``checksum`` field, which is then removed from ``meta``; ``RecordError`` naming what
    differs. Without the field: a ``RecordWarning`` (if ``warn_unchecked``)."""
    text = meta.pop(FIELD, None)
    if text is None:
        version = meta.get("version")
        if version not in _UNCHECKED_VERSIONS:
            raise RecordError(
                f"{op}: {where!r} declares record version {version!r}, which always carries a "
                f"{FIELD!r} metadata field, but has none. The file is corrupted; write it again "
                "or load a backup."
            )
        if warn_unchecked:
            warnings.warn(
                f"{op}: {where!r} has no checksum field, so damage to it cannot be detected. "
                "Save it again with this ember to add one.",
                RecordWarning,
                stacklevel=_caller_stacklevel(),
            )
        return
    meta_digest, digests = _field(op, where, text)
    if _meta_digest(meta) != meta_digest:
        raise RecordError(
            f"{op}: the metadata of {where!r} (entries {sorted(meta)}) does not match its "
            "checksum. The file is corrupted; write it again or load a backup."
        )
    names = [name for name, _ in items]
    missing = sorted(set(digests) - set(names))
    extra = sorted(set(names) - set(digests))
    if missing or extra:
        raise RecordError(
            f"{op}: the tensors of {where!r} do not match its checksum: missing {missing or 'none'}"
            f", unlisted {extra or 'none'}. The file is corrupted; write it again or load a backup."
        )
    bad = [
        name
        for name, info in items
        if _tensor_digest(name, info["dtype"], info["shape"], info["data"]) != digests[name]
    ]
    if bad:
        raise RecordError(
            f"{op}: tensor(s) {bad} of {where!r} do not match their checksum. The file is "
            "corrupted; write it again or load a backup."
        )
