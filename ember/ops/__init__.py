"""The op registry and its rows; importing this package registers every row."""

from . import elementwise, linalg, movement, reduce  # noqa: F401
from .registry import OPS, Cost, OpSpec, Saves, defop

__all__ = ["OPS", "Cost", "OpSpec", "Saves", "defop"]
