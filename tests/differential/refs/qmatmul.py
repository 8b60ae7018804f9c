"""PyTorch reference of the weight-only quantized product (``ember/ops/qmatmul.py``)."""

from __future__ import annotations

from typing import Any


def _int8_weight_linear(x: Any, w: Any, s: Any) -> Any:
    return (x @ w.to(x.dtype).T) * s.to(x.dtype).T


REFS = {"int8_weight_linear": _int8_weight_linear}
