"""The run directory's records (``records/epoch-NNNN/``): finding them and reading their JSON.

``Learner.save_record`` writes a record into ``epoch-NNNN.tmp`` and renames it when complete,
so a ``.tmp`` entry is never a record: lookups skip it and the next save deletes it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from .errors import RecordError
from .io import read_bytes

_RECORD = re.compile(r"epoch-([0-9]+)")
_PARTIAL = re.compile(r"epoch-[0-9]+\.tmp")


def record_dirs(records_dir: Path) -> list[Path]:
    """The complete-looking ``epoch-NNNN`` directories (with ``state.json`` and
    ``training.safetensors``), newest first; never a ``.tmp`` one."""
    if not records_dir.is_dir():
        return []
    found = []
    for p in records_dir.iterdir():
        m = _RECORD.fullmatch(p.name)
        if m is not None and (p / "state.json").is_file():
            if (p / "training.safetensors").is_file():
                found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found, reverse=True)]


def clean_partial_records(records_dir: Path) -> None:
    """Delete the ``epoch-NNNN.tmp`` directories that interrupted saves left behind."""
    if not records_dir.is_dir():
        return
    for p in records_dir.iterdir():
        if _PARTIAL.fullmatch(p.name):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


def _fits(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def read_state(op: str, path: Path, fields: dict[str, tuple[type, ...]]) -> dict[str, Any]:
    """A record's ``state.json``: a JSON object whose ``fields`` have those types (``bool`` only
    where listed), else ``RecordError``."""
    data = read_bytes(op, path)
    try:
        state = json.loads(data)
    except ValueError as e:
        raise RecordError(
            f"{op}: {str(path)!r} is not valid JSON ({e}). The record is damaged (an interrupted "
            "save?); resume from an earlier record."
        ) from None
    if not isinstance(state, dict):
        raise RecordError(
            f"{op}: {str(path)!r} holds a JSON {type(state).__name__}, expected an object. The "
            "record is damaged; resume from an earlier record."
        )
    bad = [
        f"{k} (expected {'/'.join(t.__name__ for t in types)}, got {type(state.get(k)).__name__})"
        for k, types in fields.items()
        if not _fits(state.get(k), types)
    ]
    if bad:
        raise RecordError(
            f"{op}: {str(path)!r} is damaged: {', '.join(bad)}. Resume from an earlier record."
        )
    return state
