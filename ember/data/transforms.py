"""Transforms: functions from a batch of samples (B, ...) to a batch, composable with ``Compose``.

They run on NumPy arrays inside the data pipeline (before the batch becomes a tensor), so they work
the same on every device and can run on the loader's prefetch thread.

Example:
    >>> t = Compose([ToFloat(scale=1 / 16), Normalize(0.5, 0.25), AddChannel()])
    >>> t(np.full((2, 8, 8), 16, dtype=np.uint8)).shape
    (2, 1, 8, 8)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ShapeError


class Compose:
    """Apply ``transforms`` left to right."""

    def __init__(self, transforms: Sequence[Callable[[np.ndarray], np.ndarray]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for t in self.transforms:
            x = t(x)
        return x


class ToFloat:
    """Cast to float32 and multiply by ``scale`` (e.g. 1/255 for uint8 images)."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = float(scale)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.float32) * np.float32(self.scale)


class Normalize:
    """``(x - mean) / std`` elementwise; mean and std are scalars or broadcast over (B, ...)."""

    def __init__(self, mean: float | Sequence[float], std: float | Sequence[float]) -> None:
        self.mean = np.asarray(mean, dtype=np.float32)
        self.std = np.asarray(std, dtype=np.float32)
        if np.any(self.std <= 0):
            raise ShapeError(f"Normalize: expected std > 0, got {std}.")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std).astype(np.float32, copy=False)


class Flatten:
    """(B, d1, d2, ...) -> (B, d1 * d2 * ...), for MLPs."""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(x.shape[0], -1)


class AddChannel:
    """(B, H, W) -> (B, 1, H, W), for convolutions on grey images."""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x[:, None]


class RandomShift:
    """Shift each image (B, ..., H, W) by up to ``pixels`` in x and y, filling with zeros.

    A light augmentation for small digit images; ``seed`` makes the shifts reproducible.
    """

    def __init__(self, pixels: int = 1, *, seed: int | None = None) -> None:
        if pixels < 0:
            raise ShapeError(f"RandomShift: expected pixels >= 0, got {pixels}.")
        self.pixels = int(pixels)
        self.rng = np.random.default_rng(seed)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        p = self.pixels
        if p == 0:
            return x
        h, w = x.shape[-2:]
        padded = np.zeros((*x.shape[:-2], h + 2 * p, w + 2 * p), dtype=x.dtype)
        padded[..., p : p + h, p : p + w] = x
        out = np.empty_like(x)
        shifts = self.rng.integers(0, 2 * p + 1, size=(x.shape[0], 2))
        for i, (dy, dx) in enumerate(shifts):
            out[i] = padded[i, ..., dy : dy + h, dx : dx + w]
        return out
