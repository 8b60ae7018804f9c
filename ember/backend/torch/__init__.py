"""The PyTorch backend: ``torch.Tensor`` as raw storage on CPU and CUDA (see ``backend.py``).

Importing this package imports PyTorch; ``ember.backend.registry`` does so only when a torch
device is first asked for.
"""

from . import backend as backend
