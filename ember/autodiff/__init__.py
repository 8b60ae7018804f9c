"""Runtime autodiff: graph nodes, the backward engine, the ``Gradients`` container.

``backward(loss, on_leaf=None)`` is the library's backward entry point (``loss.backward()`` calls
it); its ``on_leaf`` hook is what distributed data parallel overlaps communication with.
``grad``, ``vjp`` and ``hvp`` are the functional forms of higher-order gradients
(``loss.backward(create_graph=True)``, SEMANTICS.md §13). ``Function`` (with its ``FunctionCtx``)
defines an op by its forward and backward (API.md, "Extending autodiff").
"""

from typing import TYPE_CHECKING, Any

from .backprop import backward as backward
from .functional import grad as grad
from .functional import hvp as hvp
from .functional import vjp as vjp

if TYPE_CHECKING:
    from .function import Function as Function
    from .function import FunctionCtx as FunctionCtx

__all__ = ["Function", "FunctionCtx", "backward", "grad", "hvp", "vjp"]


def __getattr__(name: str) -> Any:
    """``Function`` and ``FunctionCtx``, imported on first use (``function.py`` builds on the
    tensor core, which imports this package)."""
    if name in ("Function", "FunctionCtx"):
        from . import function

        value = getattr(function, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ember.autodiff' has no attribute {name!r}")
