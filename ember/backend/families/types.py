"""Names for what backend methods take and return."""

from __future__ import annotations

from typing import Any

Raw = Any  # the backend's own array type: np.ndarray on NumPy, torch.Tensor on PyTorch
Shape = tuple[int, ...]
Pair = tuple[int, int]
Key = Any  # a basic or advanced index key: ints, slices, None, Ellipsis, index arrays
RngState = dict[str, Any]  # a JSON-ready snapshot of a backend's random generator
