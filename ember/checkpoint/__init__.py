"""Gradient checkpointing (SEMANTICS.md §7): strategies, the record and recompute sides, ``report``.

A strategy (``strategy.py``) answers, per recorded op, "keep, or recipe?". Under ``Disabled``
every op keeps what its backward reads. Under ``Balanced`` a memory-bound op with tracked parents
keeps only a recipe (its row and its parents) and its value is recomputed during backward, once,
from the nearest kept ancestors (``recompute.py``); compute-bound outputs and leaves are kept
(``record.py`` decides what each node holds). A row's declared residuals (``Saves.RESIDUALS``:
values its forward returns beside its output, such as cross-entropy's per-row logsumexp) are
kept under every strategy, a recipe's included: they are what its backward reads, and
recomputing an output does not bring them back. Gradients under any strategy equal those under
``Disabled`` bit for bit on the same backend. ``report`` (``report.py``) counts what a graph
holds, residuals included.
"""

from .report import MemoryReport as MemoryReport
from .report import report as report
