"""Downloading dataset files once into a cache directory, verified by checksum."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import EmberError

_TIMEOUT_S = 30.0


class DownloadError(EmberError, OSError):
    """A dataset file could not be fetched, or it arrived with the wrong checksum."""


def cache_dir() -> Path:
    """Where datasets are cached: ``$EMBER_DATA``, else ``~/.cache/ember``."""
    env = os.environ.get("EMBER_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ember"


def file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of the file at ``path`` with ``algorithm`` ("md5", "sha256")."""
    h = hashlib.new(algorithm, usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def open_url(url: str) -> BinaryIO:
    """Open ``url`` for reading (tests replace this to simulate servers and outages)."""
    return urllib.request.urlopen(url, timeout=_TIMEOUT_S)


def fetch(
    name: str,
    urls: Sequence[str],
    dest: Path,
    *,
    checksum: str,
    algorithm: str = "md5",
) -> Path:
    """Return ``dest``, downloading it from the first reachable of ``urls`` if it is missing.

    A cached file is trusted when its checksum matches; a download is written to a temporary file
    and moved into place only after its checksum matched, so an interrupted or corrupt download
    never poisons the cache.

    Args:
        name: Dataset name for messages ("mnist").
        urls: Mirrors tried in order.
        dest: Final path inside the cache directory.
        checksum: Expected hex digest of the file.
        algorithm: Hash algorithm of ``checksum``.

    Raises:
        DownloadError: No mirror was reachable (offline), or the file's checksum differs.
    """
    if dest.exists():
        got = file_digest(dest, algorithm)
        if got == checksum:
            return dest
        raise DownloadError(
            f"{name}: checksum mismatch for cached file {dest}: expected {algorithm} {checksum}, "
            f"got {got}. The file is corrupt or from another version; delete it and run again."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    reasons = []
    for url in urls:
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name, suffix=".part")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out, open_url(url) as resp:
                shutil.copyfileobj(resp, out)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            tmp.unlink(missing_ok=True)
            reasons.append(f"{url}: {getattr(e, 'reason', e)}")
            continue
        got = file_digest(tmp, algorithm)
        if got != checksum:
            tmp.unlink(missing_ok=True)
            raise DownloadError(
                f"{name}: checksum mismatch for {url}: expected {algorithm} {checksum}, got {got}. "
                "The download is corrupt or the mirror changed; nothing was cached. Run again, "
                f"or place a verified copy at {dest}."
            )
        os.replace(tmp, dest)
        return dest
    tried = "\n  ".join(reasons)
    raise DownloadError(
        f"{name}: could not download {dest.name}; are you offline? Tried:\n  {tried}\n"
        f"Download the file by hand into {dest.parent} (or set EMBER_DATA to a directory that "
        "holds it) and run again."
    )
