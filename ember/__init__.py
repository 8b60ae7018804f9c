"""ember: a Python deep-learning framework with runtime autodiff (after the Rust framework Burn).

Autodiff is chosen at run time: a device carries a default context, each tensor its own, and
``loss.backward()`` returns a :class:`Gradients` container. See the README for a tour.
"""

from . import data as data
from . import nn as nn
from . import ops as _ops  # noqa: F401  (registers every op row)
from . import optim as optim
from . import train as train
from .autodiff.gradients import Gradients as Gradients
from .checkpoint.strategy import GradientCheckpointingStrategy as GradientCheckpointingStrategy
from .dtype import DType as DType
from .dtype import bfloat16 as bfloat16
from .dtype import bool_ as bool  # noqa: F401  (API.md: em.bool)
from .dtype import float16 as float16
from .dtype import float32 as float32
from .dtype import float64 as float64
from .dtype import int32 as int32
from .dtype import int64 as int64
from .errors import AutodiffError as AutodiffError
from .errors import DeviceError as DeviceError
from .errors import DTypeError as DTypeError
from .errors import EmberError as EmberError
from .errors import ShapeError as ShapeError
from .tensor.creation import Distribution as Distribution
from .tensor.creation import seed as seed
from .tensor.device import Device as Device
from .tensor.device import default_device as default_device
from .tensor.tensor import Tensor as Tensor

__version__ = "0.1.0"


def tensor(data: object, *, device: Device | None = None, dtype: object = None) -> Tensor:
    """Same as ``Tensor.from_data``: ``em.tensor([[1.0, 2.0]])``."""
    return Tensor.from_data(data, device=device, dtype=dtype)
