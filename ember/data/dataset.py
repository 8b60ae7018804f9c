"""Datasets: the ``Dataset`` protocol and in-memory implementations.

A dataset is anything with ``len(ds)`` and ``ds[i]``; an item is a tuple of NumPy arrays (for
example ``(image, label)``). Datasets that can gather many items at once also provide
``get_batch(indices)``, which the ``DataLoader`` prefers because one fancy-indexing call is far
cheaper than stacking items one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ShapeError

Item = tuple[np.ndarray, ...]
Transform = Callable[[np.ndarray], np.ndarray]


@runtime_checkable
class Dataset(Protocol):
    """What the ``DataLoader`` needs: a length and integer indexing returning one item."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


def _check_index(op: str, index: int, n: int) -> int:
    if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
        raise TypeError(f"{op}: expected an int index, got {type(index).__name__}.")
    i = int(index)
    if not -n <= i < n:
        raise IndexError(f"{op}: index {i} out of range for a dataset of {n} items.")
    return i % n


class ArrayDataset:
    """Rows of equal-length NumPy arrays, e.g. features (N, ...) and labels (N,).

    Args:
        *arrays: Arrays sharing their first axis N.
        transform: Optional function applied to a batch of the first array, shape (B, ...);
            single items go through it as a batch of one.

    Example:
        >>> ds = ArrayDataset(np.zeros((10, 3)), np.arange(10))
        >>> len(ds), ds[2][1]
        (10, 2)
    """

    def __init__(self, *arrays: Any, transform: Transform | None = None) -> None:
        if not arrays:
            raise ShapeError("ArrayDataset: expected at least one array, got none.")
        arrs = [np.asarray(a) for a in arrays]
        sizes = [a.shape[0] if a.ndim else -1 for a in arrs]
        if min(sizes) < 0 or len(set(sizes)) != 1:
            raise ShapeError(
                "ArrayDataset: expected arrays with one shared first axis, got shapes "
                f"{[a.shape for a in arrs]}. Pass features (N, ...) and labels (N,)."
            )
        self.arrays: tuple[np.ndarray, ...] = tuple(arrs)
        self.transform = transform

    def __len__(self) -> int:
        return int(self.arrays[0].shape[0])

    def __getitem__(self, index: int) -> Item:
        i = _check_index("ArrayDataset", index, len(self))
        batch = self.get_batch(np.array([i]))
        return tuple(a[0] for a in batch)

    def get_batch(self, indices: np.ndarray) -> Item:
        """The items at ``indices`` (shape (B,)) stacked: one array of shape (B, ...) per field."""
        out = [a[indices] for a in self.arrays]
        if self.transform is not None:
            out[0] = self.transform(out[0])
        return tuple(out)


class InMemoryDataset:
    """A list of items (tuples of arrays or numbers), kept in memory.

    Example:
        >>> ds = InMemoryDataset([(np.ones(2), 0), (np.zeros(2), 1)])
        >>> ds[1][1]
        1
    """

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.items[_check_index("InMemoryDataset", index, len(self))]


class MapDataset:
    """``fn`` applied to every item of ``dataset`` when it is read.

    Example:
        >>> ds = MapDataset(InMemoryDataset([1, 2]), lambda v: v * 10)
        >>> ds[1]
        20
    """

    def __init__(self, dataset: Dataset, fn: Callable[[Any], Any]) -> None:
        self.dataset = dataset
        self.fn = fn

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.fn(self.dataset[index])


class Subset:
    """The items of ``dataset`` at ``indices``, in that order.

    Example:
        >>> Subset(InMemoryDataset([5, 6, 7]), [2, 0])[0]
        7
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int] | np.ndarray) -> None:
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(dataset)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"Subset: indices must lie in [0, {n}), got {idx.min()}..{idx.max()}.")
        self.dataset = dataset
        self.indices = idx

    def __len__(self) -> int:
        return int(self.indices.size)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(self.indices[_check_index("Subset", index, len(self))])]

    def get_batch(self, indices: np.ndarray) -> Item:
        """Gathers through the parent's ``get_batch`` when it has one, else collates the
        parent's items; collate errors then name the parent's indices of the bad items."""
        inner = self.indices[np.asarray(indices)]
        get = getattr(self.dataset, "get_batch", None)
        if get is not None:
            return tuple(get(inner))
        from .loader import collate

        return collate([self.dataset[int(i)] for i in inner], indices=inner.tolist())


def random_split(dataset: Dataset, lengths: Sequence[int], *, seed: int = 0) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths.

    Args:
        dataset: The dataset to split.
        lengths: Subset sizes; they must add up to ``len(dataset)``.
        seed: Seed of the permutation, so the split is reproducible.

    Example:
        >>> a, b = random_split(InMemoryDataset(list(range(10))), [8, 2], seed=0)
        >>> len(a), len(b)
        (8, 2)
    """
    n = len(dataset)
    if sum(lengths) != n or any(k < 0 for k in lengths):
        raise ShapeError(
            f"random_split: expected non-negative lengths adding up to {n}, got {list(lengths)}."
        )
    perm = np.random.default_rng(seed).permutation(n)
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start : start + k]))
        start += k
    return out
