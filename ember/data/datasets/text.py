"""Character-level text: a tokenizer, train/validation token arrays and random block batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...errors import ShapeError
from ..download import cache_dir, fetch
from ..loader import _Resumable

SHAKESPEARE_URLS = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
)
SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def shakespeare(root: Path | None = None) -> str:
    """The tiny Shakespeare corpus (1,115,394 characters), downloaded once and cached.

    Raises:
        DownloadError: Offline with no cached copy, or the file's SHA-256 differs.
    """
    path = fetch(
        "shakespeare",
        SHAKESPEARE_URLS,
        (root or cache_dir()) / "shakespeare" / "input.txt",
        checksum=SHAKESPEARE_SHA256,
        algorithm="sha256",
    )
    return path.read_text(encoding="utf-8")


def load_text(path: str | Path) -> str:
    """A local UTF-8 text file (for ``ember train --text PATH``)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"load_text: no such file {str(p)!r}; pass a UTF-8 text file.")
    return p.read_text(encoding="utf-8")


class CharTokenizer:
    """Maps each distinct character to an id (sorted by code point) and back.

    Example:
        >>> tok = CharTokenizer.from_text("hello")
        >>> tok.vocab_size, tok.decode(tok.encode("hole"))
        (4, 'hole')
    """

    def __init__(self, chars: str) -> None:
        if not chars or len(set(chars)) != len(chars):
            raise ShapeError("CharTokenizer: expected a non-empty string of distinct characters.")
        self.chars = chars
        self._ids = {c: i for i, c in enumerate(chars)}

    @staticmethod
    def from_text(text: str) -> CharTokenizer:
        return CharTokenizer("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Ids of ``text``, int64 of shape (len(text),)."""
        try:
            return np.fromiter((self._ids[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as e:
            raise ShapeError(
                f"CharTokenizer.encode: character {e.args[0]!r} is not in the vocabulary of "
                f"{self.vocab_size} characters; use characters of the training text."
            ) from None

    def decode(self, ids: Any) -> str:
        """The text for a sequence of ids."""
        return "".join(self.chars[int(i)] for i in np.asarray(ids).reshape(-1))

    def to_dict(self) -> dict[str, str]:
        return {"chars": self.chars}

    @staticmethod
    def from_dict(d: dict[str, str]) -> CharTokenizer:
        return CharTokenizer(d["chars"])


class TextData:
    """A text encoded with a ``CharTokenizer`` and split into train (first 90%) and validation.

    Example:
        >>> data = TextData("abcabcabca" * 10)
        >>> data.train.shape, data.val.shape
        ((90,), (10,))
    """

    def __init__(self, text: str, *, train_fraction: float = 0.9) -> None:
        if not 0.0 < train_fraction < 1.0:
            raise ShapeError(f"TextData: expected 0 < train_fraction < 1, got {train_fraction}.")
        self.tokenizer = CharTokenizer.from_text(text)
        ids = self.tokenizer.encode(text)
        n = int(len(ids) * train_fraction)
        self.train = ids[:n]
        self.val = ids[n:]


class RandomBlocks(_Resumable):
    """Batches of random windows of a token array: inputs (B, T) and next-token targets (B, T).

    Each "epoch" is ``batches`` batches whose offsets come from ``seed`` and the epoch number, so
    it is reproducible and resumable like a ``DataLoader`` (same ``state_dict`` methods).

    Example:
        >>> blocks = RandomBlocks(np.arange(100), block_size=8, batch_size=4, batches=2, seed=0)
        >>> x, y = next(iter(blocks))
        >>> x.shape, bool((y.to_numpy() == x.to_numpy() + 1).all())
        ((4, 8), True)
    """

    def __init__(
        self,
        data: np.ndarray,
        *,
        block_size: int,
        batch_size: int,
        batches: int,
        seed: int = 0,
        device: Device | None = None,
    ) -> None:
        if len(data) <= block_size:
            raise ShapeError(
                f"RandomBlocks: the text has {len(data)} tokens, need more than block_size "
                f"{block_size}. Use a longer text or a smaller --block-size."
            )
        if batch_size < 1 or batches < 1:
            raise ShapeError(
                f"RandomBlocks: expected batch_size >= 1 and batches >= 1, got {batch_size}, "
                f"{batches}."
            )
        self.data = np.asarray(data, dtype=np.int64)
        self.block_size = block_size
        self.batch_size = batch_size
        self.batches = batches
        self.seed = seed
        self.device = device
        self.epoch = 0
        self._start = 0
        self._position = 0

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        epoch, start = self.epoch, self._start
        offsets = np.random.default_rng([self.seed, epoch]).integers(
            0, len(self.data) - self.block_size, size=(self.batches, self.batch_size)
        )
        steps = np.arange(self.block_size + 1)
        self._position = start
        for k in range(start, self.batches):
            window = self.data[offsets[k][:, None] + steps]  # (B, T + 1)
            x = Tensor.from_data(window[:, :-1], device=self.device)
            y = Tensor.from_data(window[:, 1:], device=self.device)
            self._position += 1
            yield x, y
        self.epoch = epoch + 1
        self._start = self._position = 0
