"""``DataLoader``: batches of tensors, seeded shuffling and background prefetching."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .._core.device import Device
from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from .dataset import Dataset, Item

_DONE = object()


def collate(items: Sequence[Any], *, indices: Sequence[int] | None = None) -> Item:
    """Stack a list of items (tuples of arrays or numbers) into one array per field, (B, ...).

    Args:
        items: The batch's items; each a tuple of fields (or one array-like).
        indices: The items' dataset indices, named in errors (default: their batch positions).

    Raises:
        ShapeError: The batch is empty, the items have different numbers of fields, or a field
            has different shapes across items (the message names the items and their shapes).
        DTypeError: A field mixes kinds of dtype (bool, int, float, ...) across items.
    """
    if not items:
        raise ShapeError("collate: expected at least one item, got an empty batch.")
    names = list(range(len(items))) if indices is None else [int(i) for i in indices]
    what = "batch position" if indices is None else "dataset index"
    first = items[0]
    if not isinstance(first, tuple):
        return (_stack([np.asarray(it) for it in items], names, what, "the item"),)
    width = len(first)
    for name, it in zip(names, items):
        if not isinstance(it, tuple) or len(it) != width:
            got = f"has {len(it)}" if isinstance(it, tuple) else f"is a {type(it).__name__}"
            raise ShapeError(
                f"collate: the item at {what} {names[0]} has {width} fields, the item at "
                f"{what} {name} {got}; every item must have the same fields. Fix the "
                "dataset's __getitem__ or pass a collate_fn."
            )
    return tuple(
        _stack([np.asarray(it[k]) for it in items], names, what, f"field {k}") for k in range(width)
    )


def _groups(keys: Sequence[Any], names: Sequence[int], what: str) -> str:
    """``"(3,) at dataset index 0, 2; (4,) at dataset index 1"``: the items sharing each key."""
    seen: dict[Any, list[int]] = {}
    for key, name in zip(keys, names):
        seen.setdefault(key, []).append(name)
    parts = []
    for key, members in seen.items():
        listed = ", ".join(str(m) for m in members[:5]) + (", ..." if len(members) > 5 else "")
        parts.append(f"{key} at {what} {listed}")
    return "; ".join(parts)


def _stack(arrays: list[np.ndarray], names: Sequence[int], what: str, subject: str) -> np.ndarray:
    shapes = [a.shape for a in arrays]
    if len(set(shapes)) > 1:
        raise ShapeError(
            f"collate: {subject} differs in shape across the batch: "
            f"{_groups(shapes, names, what)}; "
            "a batch stacks items of one shape. Pad or resize them in the dataset, or pass a "
            "collate_fn that does."
        )
    kinds = [a.dtype.kind for a in arrays]
    if len(set(kinds)) > 1:
        dtypes = [str(a.dtype) for a in arrays]
        raise DTypeError(
            f"collate: {subject} mixes kinds of dtype across the batch: "
            f"{_groups(dtypes, names, what)}; "
            "return one kind (e.g. always int labels, always float features) from the dataset."
        )
    return np.stack(arrays)


def to_tensors(batch: Item, device: Device | None) -> tuple[Tensor, ...]:
    """NumPy fields to tensors on ``device``: floats become float32, ints int64, bools bool."""
    out = []
    for a in batch:
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.dtype != np.float32:
            a = a.astype(np.float32)
        elif a.dtype.kind in "iu" and a.dtype != np.int64:
            a = a.astype(np.int64)
        out.append(Tensor.from_data(a, device=device))
    return tuple(out)


class _Prefetcher:
    """A daemon thread filling a bounded queue with the loader's batches."""

    def __init__(self, source: Iterator[Any], depth: int) -> None:
        self.q: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, args=(source,), daemon=True)
        self.thread.start()

    def _put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, source: Iterator[Any]) -> None:
        try:
            for item in source:
                if not self._put(item):
                    return
        except BaseException as e:  # handed to the consumer, re-raised there
            self._put(_Failure(e))
            return
        self._put(_DONE)

    def get(self) -> Any:
        item = self.q.get()
        if isinstance(item, _Failure):
            raise item.error
        return item

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5.0)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Resumable:
    """Epoch and batch position of a seeded batch source, saved and restored mid-epoch.

    Subclasses set ``seed``, ``epoch`` and ``_start`` (first batch of the next pass) and
    ``_position`` (batches handed out in the current pass).
    """

    seed: int
    epoch: int
    _start: int
    _position: int

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass epoch ``epoch`` (from its first batch)."""
        self.epoch = int(epoch)
        self._start = 0

    def state_dict(self) -> dict[str, int]:
        """Where the source stands: seed, epoch and batches already taken from it."""
        return {"seed": self.seed, "epoch": self.epoch, "batch": self._position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a ``state_dict``: the next pass resumes at the saved batch."""
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._start = int(state.get("batch", 0))
        self._position = self._start


def _default_seed() -> int:
    """One shuffle seed from the NumPy backend's generator (the one ``em.seed`` seeds)."""
    from ..backend.numpy.backend import NumpyBackend
    from ..backend.registry import get_backend

    backend = get_backend("numpy")
    assert isinstance(backend, NumpyBackend)
    return int(backend.rng.integers(2**62))


class DataLoader(_Resumable):
    """Iterate over a dataset in batches of tensors.

    Each pass (epoch) visits every item once. With ``shuffle`` the order of epoch ``e`` is a
    permutation drawn from ``seed`` and ``e`` alone, so two loaders with the same seed yield the
    same batches, and a loader restored with ``load_state_dict`` continues exactly where the saved
    one stopped (even mid-epoch).

    Args:
        dataset: Any ``Dataset``; one with ``get_batch(indices)`` is gathered in one call.
        batch_size: Items per batch B.
        shuffle: Visit items in a new random order every epoch.
        drop_last: Skip the last batch when it has fewer than B items.
        seed: Seed of the shuffling. When None, one integer is drawn from ember's default
            generator (the NumPy backend's, which ``em.seed`` seeds) as the loader is created
            and kept in ``state_dict``: after ``em.seed(n)`` a loader built the same way
            shuffles the same way, and a restored loader keeps the saved seed. The draw
            advances that generator, as PyTorch's DataLoader advances torch's; a loader
            without ``shuffle`` draws nothing (its seed is 0).
        prefetch: Batches prepared ahead on a background thread; 0 prepares them inline.
        device: Where the tensors are created (``em.default_device()`` when None).
        collate_fn: Turns a list of items into a tuple of arrays (default: ``collate``).

    Example:
        >>> ds = ArrayDataset(np.zeros((10, 3)), np.arange(10))
        >>> [len(y) for _, y in DataLoader(ds, batch_size=4)]
        [4, 4, 2]
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 32,
        *,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
        prefetch: int = 2,
        device: Device | None = None,
        collate_fn: Callable[[list[Any]], Item] | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ShapeError(f"DataLoader: expected batch_size >= 1, got {batch_size!r}.")
        if prefetch < 0:
            raise ShapeError(f"DataLoader: expected prefetch >= 0, got {prefetch}.")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        if seed is None:
            seed = _default_seed() if shuffle else 0
        self.seed = int(seed)
        self.prefetch = prefetch
        self.device = device
        self.collate_fn = collate_fn or collate
        self.epoch = 0
        self._start = 0  # first batch of the next pass (non-zero after a mid-epoch restore)
        self._position = 0  # batches handed out in the current pass

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The item indices of ``epoch`` in visiting order, shape (N,)."""
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng([self.seed, epoch]).permutation(n)

    def _batches(self, epoch: int, start: int) -> Iterator[tuple[Tensor, ...]]:
        idx = self.order(epoch)
        get = getattr(self.dataset, "get_batch", None)
        for k in range(start, len(self)):
            sel = idx[k * self.batch_size : (k + 1) * self.batch_size]
            if get is not None:
                fields = tuple(get(sel))
            elif self.collate_fn is collate:  # name the dataset indices in its errors
                fields = collate([self.dataset[int(i)] for i in sel], indices=sel.tolist())
            else:
                fields = self.collate_fn([self.dataset[int(i)] for i in sel])
            yield to_tensors(fields, self.device)

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        epoch, start = self.epoch, self._start
        self._position = start
        source = self._batches(epoch, start)
        if self.prefetch == 0:
            for batch in source:
                self._position += 1
                yield batch
        else:
            pre = _Prefetcher(source, self.prefetch)
            try:
                while (batch := pre.get()) is not _DONE:
                    self._position += 1
                    yield batch
            finally:
                pre.close()
        self.epoch = epoch + 1
        self._start = 0
        self._position = 0
