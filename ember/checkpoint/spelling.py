"""Strategies spelled as text (``ember train --checkpointing``, ``Learner(checkpointing=)``).

``"disabled"``, ``"balanced"``, ``"budget:F"`` (a fraction 0 < F <= 1 of the Disabled peak) or
``"budget:N"`` / ``"budget:N<unit>"`` (bytes; units KiB, MiB, GiB, KB, MB, GB).
"""

from __future__ import annotations

import re

from ..errors import AutodiffError
from .strategy import GradientCheckpointingStrategy as Strategy

_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6}
_UNITS["gb"] = 10**9
_SIZE = re.compile(r"^([0-9]+)\s*([a-z]*)$")
SPELLINGS = "disabled, balanced, budget:F (0 < F <= 1) or budget:N[KiB|MiB|GiB]"


def parse_strategy(text: str) -> Strategy:
    """The strategy ``text`` names (case-insensitive); ``AutodiffError`` for anything else."""
    s = text.strip().lower()
    if s == "disabled":
        return Strategy.Disabled
    if s == "balanced":
        return Strategy.Balanced
    if s.startswith("budget:"):
        value = s[len("budget:") :].strip()
        m = _SIZE.match(value)
        if m is not None and m.group(2) in _UNITS and (m.group(2) or int(m.group(1)) > 1):
            return Strategy.budget(bytes=int(m.group(1)) * _UNITS[m.group(2)])
        try:
            fraction = float(value)
        except ValueError:
            fraction = None
        if fraction is not None:
            return Strategy.budget(fraction=fraction)
    raise AutodiffError(
        f"checkpointing: expected one of {SPELLINGS}, got {text!r}. "
        "Hint: budget:0.4 keeps at most 40% of the Disabled peak."
    )
