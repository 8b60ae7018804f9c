"""The op registry and its rows; importing this package registers every row.

One module per family, named as the tensor-method modules (ember/_core/) and the backend kernel
families (ember/backend/families/) are: elementwise, activation, layout, index, reduce, linalg,
nn (with conv), plus the rows backward rules and the fused loss use.
"""

from . import (  # noqa: F401
    activation,
    backward_rows,
    conv,
    division,
    elementwise,
    gru,
    index,
    layout,
    linalg,
    linear_ce,
    lstm_layer,
    nn,
    qmatmul,
    recurrent_layer,
    reduce,
    rnn,
)
from .registry import OPS, Cost, OpSpec, Saves, defop

__all__ = ["OPS", "Cost", "OpSpec", "Saves", "defop"]
