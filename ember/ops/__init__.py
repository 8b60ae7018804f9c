"""The op registry and its rows; importing this package registers every row."""

from . import (  # noqa: F401
    activations,
    backward_rows,
    conv,
    division,
    elementwise,
    indexing,
    linalg,
    linear_ce,
    movement,
    nn,
    reduce,
    rounding,
    shape,
    sorting,
    stats,
)
from .registry import OPS, Cost, OpSpec, Saves, defop

__all__ = ["OPS", "Cost", "OpSpec", "Saves", "defop"]
