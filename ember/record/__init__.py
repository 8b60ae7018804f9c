"""Records: saving and loading module state, training state and PyTorch weights.

All writes are atomic (temporary file, fsync, rename; the file's mode follows the umask, and
temp files left by crashed writes are deleted by the next save). Loading never runs code from
the file, reads regular files only (a directory, FIFO or device is refused, and a safetensors
file must be exactly as long as its header declares), and raises ``RecordError`` (or
``ShapeError`` / ``DTypeError``) listing every mismatch.

Damage detection: every file ember writes carries a ``checksum`` entry in its safetensors
metadata, JSON ``{"algorithm": "sha256", "metadata": <hex>, "tensors": {<name>: <hex>}}``:
one SHA-256 digest per tensor (over its name, dtype, shape and bytes) and one over all other
metadata entries (sorted-key JSON). A mismatch is a ``RecordError`` naming the tensors or the
metadata. Files without the field (older ember, other tools) still load, with a
``RecordWarning``; ``load_pytorch`` reads other tools' files without the warning.

``load_training`` checks everything (checksum, step, unique parameter ids, scheduler state,
module and optimizer shapes and dtypes) before it changes anything, and changes nothing when it
fails.
"""

from .errors import RecordError as RecordError
from .errors import RecordWarning as RecordWarning
from .pytorch import load_pytorch as load_pytorch
from .pytorch import read_pytorch as read_pytorch
from .safetensors import load_module as load_module
from .safetensors import save_module as save_module
from .training import load_training as load_training
from .training import save_training as save_training
