"""Records: saving and loading module state, training state and PyTorch weights.

All writes are atomic (temporary file, fsync, rename); loading never runs code from the file and
raises ``RecordError`` (or ``ShapeError`` / ``DTypeError``) listing every mismatch.
"""

from .errors import RecordError as RecordError
from .pytorch import load_pytorch as load_pytorch
from .pytorch import read_pytorch as read_pytorch
from .safetensors import load_module as load_module
from .safetensors import save_module as save_module
from .training import load_training as load_training
from .training import save_training as save_training
