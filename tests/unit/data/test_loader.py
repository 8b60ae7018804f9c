"""DataLoader: batching, drop_last, seeded shuffling, resume, prefetching, errors."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.data import ArrayDataset, DataLoader, InMemoryDataset, Subset, random_split


def _ds(n: int = 10) -> ArrayDataset:
    return ArrayDataset(np.arange(n * 2, dtype=np.float64).reshape(n, 2), np.arange(n))


def _labels(loader: DataLoader) -> list[list[int]]:
    return [y.tolist() for _, y in loader]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_batches_in_order_and_types(prefetch: int) -> None:
    batches = list(DataLoader(_ds(), batch_size=4, prefetch=prefetch))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    x, y = batches[0]
    assert x.shape == (4, 2) and x.dtype == em.float32 and y.dtype == em.int64


def test_drop_last_and_len() -> None:
    loader = DataLoader(_ds(10), batch_size=4, drop_last=True)
    assert len(loader) == 2 and _labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(_ds(10), batch_size=4)) == 3


def test_seeded_shuffle_is_deterministic_and_changes_per_epoch() -> None:
    a = DataLoader(_ds(50), batch_size=8, shuffle=True, seed=7)
    b = DataLoader(_ds(50), batch_size=8, shuffle=True, seed=7)
    first_a, first_b = _labels(a), _labels(b)
    assert first_a == first_b
    assert sorted(v for batch in first_a for v in batch) == list(range(50))
    assert first_a != [list(range(i, min(i + 8, 50))) for i in range(0, 50, 8)]
    assert _labels(a) != first_a  # epoch 2 has a new order
    assert _labels(DataLoader(_ds(50), batch_size=8, shuffle=True, seed=8)) != first_a


def test_state_dict_resumes_mid_epoch() -> None:
    ref = DataLoader(_ds(40), batch_size=6, shuffle=True, seed=3)
    _labels(ref)
    expected = _labels(ref)  # epoch 2
    src = DataLoader(_ds(40), batch_size=6, shuffle=True, seed=3)
    _labels(src)
    it = iter(src)
    head = [next(it)[1].tolist() for _ in range(3)]
    state = src.state_dict()
    assert state == {"seed": 3, "epoch": 1, "batch": 3}
    it.close()
    dst = DataLoader(_ds(40), batch_size=6, shuffle=True, seed=99)
    dst.load_state_dict(state)
    assert head + _labels(dst) == expected


def test_generic_dataset_is_collated() -> None:
    items = [(np.full(3, i, dtype=np.float32), i % 2) for i in range(5)]
    x, y = next(iter(DataLoader(InMemoryDataset(items), batch_size=5, prefetch=0)))
    assert x.shape == (5, 3) and y.tolist() == [0, 1, 0, 1, 0]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_collate_errors_name_the_items_and_their_shapes(prefetch: int) -> None:
    items = [(np.zeros(3, np.float32), 1) for _ in range(6)]
    items[4] = (np.zeros(4, np.float32), 1)
    loader = DataLoader(InMemoryDataset(items), batch_size=3, prefetch=prefetch)
    with pytest.raises(
        em.ShapeError,
        match=r"field 0 differs in shape across the batch: \(3,\) at dataset index 3, 5; "
        r"\(4,\) at dataset index 4",
    ):
        list(loader)
    items[4] = (np.zeros(3, np.float32), 1.5)  # a float label among int ones
    with pytest.raises(
        em.DTypeError,
        match=r"field 1 mixes kinds of dtype.*int64 at dataset index 3, 5; "
        r"float64 at dataset index 4",
    ):
        list(DataLoader(InMemoryDataset(items), batch_size=3, prefetch=prefetch))


def test_collate_errors_without_a_loader() -> None:
    from ember.data.loader import collate

    with pytest.raises(em.ShapeError, match=r"\(2,\) at batch position 0; \(3,\) at batch"):
        collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(em.ShapeError, match="position 0 has 2 fields, the item at batch posi"):
        collate([(1, 2), (1,)])
    with pytest.raises(em.ShapeError, match="dataset index 7 is a list"):
        collate([(1, 2), [1, 2]], indices=[3, 7])
    with pytest.raises(em.ShapeError, match="empty batch"):
        collate([])
    assert [a.tolist() for a in collate([(1, 2.0), (3, 4.0)])] == [[1, 3], [2.0, 4.0]]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_subset_collate_errors_name_the_parent_indices(prefetch: int) -> None:
    """A Subset of a dataset without get_batch collates the parent's items; an error names the
    parent's index of the bad item, not its batch position."""
    items = [(np.zeros(3, np.float32), 1) for _ in range(8)]
    items[6] = (np.zeros(4, np.float32), 1)
    sub = Subset(InMemoryDataset(items), [1, 6, 2])
    with pytest.raises(
        em.ShapeError,
        match=r"\(3,\) at dataset index 1, 2; \(4,\) at dataset index 6",
    ):
        sub.get_batch(np.array([0, 1, 2]))
    with pytest.raises(em.ShapeError, match=r"\(4,\) at dataset index 6"):
        list(DataLoader(sub, batch_size=3, prefetch=prefetch))


def test_default_shuffle_seed_follows_em_seed() -> None:
    """seed=None draws the shuffle seed from ember's default generator, which em.seed seeds."""

    def order(n: int) -> list[list[int]]:
        em.seed(n)
        return _labels(DataLoader(_ds(40), batch_size=8, shuffle=True, prefetch=0))

    first = order(3)
    assert order(3) == first
    assert first != [list(range(i, i + 8)) for i in range(0, 40, 8)]  # it does shuffle
    assert order(4) != first
    em.seed(3)
    a = DataLoader(_ds(40), batch_size=8, shuffle=True)
    b = DataLoader(_ds(40), batch_size=8, shuffle=True)  # the next draw: another seed
    assert a.seed != b.seed
    # the drawn seed is saved state: a loader restored from it repeats the order
    c = DataLoader(_ds(40), batch_size=8, shuffle=True, seed=0)
    c.load_state_dict(a.state_dict())
    assert _labels(c) == _labels(a) == first
    # a loader that does not shuffle leaves the generator alone
    em.seed(3)
    assert DataLoader(_ds(40), batch_size=8).seed == 0
    assert _labels(DataLoader(_ds(40), batch_size=8, shuffle=True, prefetch=0)) == first


def test_prefetch_thread_forwards_errors() -> None:
    class Broken:
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> tuple[np.ndarray]:
            raise RuntimeError("bad item")

    with pytest.raises(RuntimeError, match="bad item"):
        list(DataLoader(Broken(), batch_size=2, prefetch=2))


def test_bad_arguments() -> None:
    with pytest.raises(em.ShapeError, match="batch_size"):
        DataLoader(_ds(), batch_size=0)
    with pytest.raises(em.ShapeError, match="shared first axis"):
        ArrayDataset(np.zeros((3, 2)), np.zeros(4))


def test_subset_and_random_split() -> None:
    a, b = random_split(_ds(10), [7, 3], seed=1)
    labels = sorted([int(a[i][1]) for i in range(7)] + [int(b[i][1]) for i in range(3)])
    assert labels == list(range(10))
    sub = Subset(_ds(10), [9, 0])
    assert [int(v) for v in sub.get_batch(np.array([0, 1]))[1]] == [9, 0]
    with pytest.raises(em.ShapeError, match="adding up"):
        random_split(_ds(10), [5, 4])
