"""NumPy kernel of the embedding gradient."""

from __future__ import annotations

import numpy as np


def embedding_backward(grad: np.ndarray, indices: np.ndarray, num_embeddings: int) -> np.ndarray:
    """Sum the rows of ``grad`` (..., D) into a (num_embeddings, D) table at ``indices``."""
    d = grad.shape[-1]
    out = np.zeros((num_embeddings, d), dtype=grad.dtype)
    np.add.at(out, indices.reshape(-1), grad.reshape(-1, d))
    return out
