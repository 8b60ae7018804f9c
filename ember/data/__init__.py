"""Datasets and data loading: the ``Dataset`` protocol, transforms, ``DataLoader`` and datasets.

Example:
    >>> import ember as em
    >>> train = em.data.datasets.digits("train")
    >>> loader = em.data.DataLoader(train, batch_size=64, shuffle=True, seed=0)
    >>> x, y = next(iter(loader))
    >>> x.shape, y.shape
    ((64, 1, 8, 8), (64,))
"""

from . import datasets as datasets
from . import transforms as transforms
from .dataset import ArrayDataset as ArrayDataset
from .dataset import Dataset as Dataset
from .dataset import InMemoryDataset as InMemoryDataset
from .dataset import MapDataset as MapDataset
from .dataset import Subset as Subset
from .dataset import random_split as random_split
from .download import DownloadError as DownloadError
from .download import cache_dir as cache_dir
from .loader import DataLoader as DataLoader
