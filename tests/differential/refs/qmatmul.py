"""PyTorch reference of the weight-only quantized product (``ember/ops/qmatmul.py``)."""

from __future__ import annotations

from typing import Any


def _int8_weight_matmul(x: Any, w: Any, s: Any) -> Any:
    return (x @ w.to(x.dtype)) * s.to(x.dtype)


REFS = {"int8_weight_matmul": _int8_weight_matmul}
