"""ember: a Python deep-learning framework with runtime autodiff (after the Rust framework Burn).

Autodiff is chosen at run time: a device carries a default context, each tensor its own, and
``loss.backward()`` returns a :class:`Gradients` container. See the README for a tour.

The public names are ``__all__`` (the names API.md puts on ``em.``), and ``dir(em)`` lists
exactly those. Other modules are imported by name: ``from ember import record``,
``from ember.models import GPT``, ``from ember import distributed``.
"""

from . import amp as amp
from . import autodiff as autodiff
from . import checkpoint as checkpoint
from . import data as data
from . import nn as nn
from . import ops as _ops  # noqa: F401  (registers every op row)
from . import optim as optim
from . import quantization as quantization
from . import train as train
from ._capture import capture as capture
from ._core.creation import Distribution as Distribution
from ._core.creation import seed as seed
from ._core.device import Device as Device
from ._core.device import default_device as default_device
from ._core.qscheme import QuantScheme as QuantScheme
from ._core.tensor import Tensor as Tensor
from ._generator import Generator as Generator
from ._generator import get_rng_state as get_rng_state
from ._generator import set_rng_state as set_rng_state
from .autodiff.gradients import Gradients as Gradients
from .checkpoint.strategy import GradientCheckpointingStrategy as GradientCheckpointingStrategy
from .dtype import DType as DType
from .dtype import bfloat16 as bfloat16
from .dtype import bool_ as bool  # API.md: em.bool (the builtin is not used below)
from .dtype import float16 as float16
from .dtype import float32 as float32
from .dtype import float64 as float64
from .dtype import int8 as int8
from .dtype import int32 as int32
from .dtype import int64 as int64
from .errors import AutodiffError as AutodiffError
from .errors import CaptureError as CaptureError
from .errors import DeviceError as DeviceError
from .errors import DTypeError as DTypeError
from .errors import EmberError as EmberError
from .errors import ShapeError as ShapeError

__version__ = "0.1.0"

__all__ = [
    # devices, tensors, random numbers
    "Device",
    "default_device",
    "Tensor",
    "tensor",
    "Distribution",
    "seed",
    "Generator",
    "get_rng_state",
    "set_rng_state",
    # dtypes
    "DType",
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "int32",
    "int64",
    "bool",
    # autodiff and checkpointing
    "Gradients",
    "GradientCheckpointingStrategy",
    # whole-step capture
    "capture",
    # quantization
    "QuantScheme",
    # errors
    "EmberError",
    "AutodiffError",
    "ShapeError",
    "DTypeError",
    "DeviceError",
    "CaptureError",
    # subpackages
    "amp",
    "autodiff",
    "checkpoint",
    "data",
    "nn",
    "optim",
    "quantization",
    "train",
]


def tensor(data: object, *, device: Device | None = None, dtype: object = None) -> Tensor:
    """Same as ``Tensor.from_data``: ``em.tensor([[1.0, 2.0]])``."""
    return Tensor.from_data(data, device=device, dtype=dtype)


def __dir__() -> list[str]:
    """``dir(em)``: the public names. Internal modules that the import system binds as attributes
    of the package (``ember.backend``, ``ember.ops``, ``ember.record`` once imported ...) stay
    reachable under their full names but are not listed."""
    return sorted([*__all__, "__version__"])
