"""Runtime autodiff: graph nodes, the backward engine, the ``Gradients`` container.

``backward(loss, on_leaf=None)`` is the library's backward entry point (``loss.backward()`` calls
it); its ``on_leaf`` hook is what distributed data parallel overlaps communication with.
"""

from .backprop import backward as backward

__all__ = ["backward"]
