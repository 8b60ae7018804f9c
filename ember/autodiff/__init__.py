"""Runtime autodiff: graph nodes, the backward engine, the ``Gradients`` container.

``backward(loss, on_leaf=None)`` is the library's backward entry point (``loss.backward()`` calls
it); its ``on_leaf`` hook is what distributed data parallel overlaps communication with.
``grad``, ``vjp`` and ``hvp`` are the functional forms of higher-order gradients
(``loss.backward(create_graph=True)``, SEMANTICS.md §13).
"""

from .backprop import backward as backward
from .functional import grad as grad
from .functional import hvp as hvp
from .functional import vjp as vjp

__all__ = ["backward", "grad", "hvp", "vjp"]
