"""MNIST and Fashion-MNIST: downloaded on first use into the cache, verified by MD5."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from ...errors import ShapeError
from ..dataset import ArrayDataset, Transform
from ..download import DownloadError, cache_dir, fetch
from ..transforms import AddChannel, Compose, ToFloat

# file -> MD5 of the published .gz files (the same for every mirror)
_SOURCES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "mnist": (
        (
            "https://ossci-datasets.s3.amazonaws.com/mnist/",
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
        ),
        {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
    ),
    "fashion-mnist": (
        (
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
        ),
        {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
    ),
}


def read_idx(path: Path) -> np.ndarray:
    """Decode a gzipped IDX file (the MNIST format) into a uint8 array."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DownloadError(f"read_idx: {path} is not an unsigned-byte IDX file.")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DownloadError(f"read_idx: {path} is truncated: header says {dims}.")
    return body.reshape(dims)


def _load(kind: str, split: str, root: Path | None, transform: Transform | None) -> ArrayDataset:
    if split not in ("train", "test"):
        raise ShapeError(f"{kind}: expected split 'train' or 'test', got {split!r}.")
    mirrors, files = _SOURCES[kind]
    prefix = "train" if split == "train" else "t10k"
    folder = (root or cache_dir()) / kind
    arrays = []
    for part in ("images-idx3", "labels-idx1"):
        fname = f"{prefix}-{part}-ubyte.gz"
        path = fetch(kind, [m + fname for m in mirrors], folder / fname, checksum=files[fname])
        arrays.append(read_idx(path))
    images, labels = arrays
    steps: list[Transform] = [ToFloat(1 / 255), AddChannel()]
    if transform is not None:
        steps.append(transform)
    pipeline = Compose(steps)
    return ArrayDataset(images, labels.astype(np.int64), transform=pipeline)


def mnist(
    split: str = "train", *, root: Path | None = None, transform: Transform | None = None
) -> ArrayDataset:
    """MNIST: float32 images (N, 1, 28, 28) in [0, 1] and labels (N,); 60,000 train, 10,000 test.

    Downloaded on first use into ``root`` (default ``cache_dir()/mnist``) and checked by MD5.

    Raises:
        DownloadError: Offline with no cached copy, or a file with the wrong checksum.
    """
    return _load("mnist", split, root, transform)


def fashion_mnist(
    split: str = "train", *, root: Path | None = None, transform: Transform | None = None
) -> ArrayDataset:
    """Fashion-MNIST (Zalando, MIT licence), in the same layout as ``mnist``."""
    return _load("fashion-mnist", split, root, transform)
