"""Reference implementations in PyTorch for every registry row, merged from this package.

Each module here (``core.py`` for the core rows; other families add ``ops.py``, ``nn.py`` ...)
defines ``REFS: dict[str, Callable]`` mapping a row name to ``fn(*torch_inputs, **attrs)``, which
returns the torch result for the row's inputs (one torch tensor per input, list-input rows get
them all as positional arguments) and its attributes (the same dict the row receives). Every
module is imported automatically; a name defined twice is an error.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

Ref = Callable[..., Any]


def _collect() -> dict[str, Ref]:
    merged: dict[str, Ref] = {}
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        refs: dict[str, Ref] = getattr(module, "REFS", {})
        for name, fn in refs.items():
            if name in merged:
                raise ValueError(
                    f"refs: row {name!r} has references in both {owner[name]} and {info.name}"
                )
            merged[name] = fn
            owner[name] = info.name
    return merged


REFS: dict[str, Ref] = _collect()
