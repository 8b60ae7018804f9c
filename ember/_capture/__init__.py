"""Whole-step capture (``em.capture``): record a training step once per signature, replay it.

- ``signature.py``: what a call is made of (the cache key, its inputs, its state);
- ``cache.py``: the bounded cache of recordings of one captured function;
- ``guard.py``: the host-read guard around the wrapped function (``ember/_core/hostread.py``);
- ``eager.py``: the CPU backends, warm-up calls and ``fallback=True``;
- ``state.py`` and ``graph.py``: a CUDA graph of the whole call, its static inputs and state;
- ``api.py``: ``capture`` and the ``Captured`` callable.

The package is private (``ember._capture``): ``em.capture`` is the public name.
"""

from .api import Captured as Captured
from .api import capture as capture
