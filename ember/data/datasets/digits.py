"""The 1,797 labelled 8x8 handwritten digits shipped inside ember (no download needed).

Source: the UCI *Optical Recognition of Handwritten Digits* test set as shipped by scikit-learn;
see ``ember/data/files/README.md`` for the attribution and licences.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from ...errors import ShapeError
from ..dataset import ArrayDataset, Transform

NUM_CLASSES = 10
TEST_FRACTION = 0.2
SPLIT_SEED = 0


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """All digits: images uint8 (1797, 8, 8) with values 0..16, labels uint8 (1797,)."""
    with resources.files("ember.data").joinpath("files", "digits.npz").open("rb") as f:
        z = np.load(f)
        return z["images"], z["labels"]


def digits(split: str = "train", *, transform: Transform | None = None) -> ArrayDataset:
    """The digits as an ``ArrayDataset`` of float32 images (N, 1, 8, 8) in [0, 1] and labels (N,).

    The split is fixed (a seeded permutation): 1,438 train and 359 test images.

    Args:
        split: "train", "test" or "all".
        transform: Optional batch transform applied to the images.

    Example:
        >>> len(digits("train")), len(digits("test"))
        (1438, 359)
    """
    images, labels = load_digits()
    n = labels.shape[0]
    perm = np.random.default_rng(SPLIT_SEED).permutation(n)
    n_test = round(n * TEST_FRACTION)
    if split == "train":
        idx = np.sort(perm[n_test:])
    elif split == "test":
        idx = np.sort(perm[:n_test])
    elif split == "all":
        idx = np.arange(n)
    else:
        raise ShapeError(f"digits: expected split 'train', 'test' or 'all', got {split!r}.")
    x = (images[idx].astype(np.float32) / np.float32(16.0))[:, None]  # (N, 8, 8) -> (N, 1, 8, 8)
    return ArrayDataset(x, labels[idx].astype(np.int64), transform=transform)
