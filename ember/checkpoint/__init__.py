"""Gradient checkpointing: strategies (SEMANTICS.md §7) and ``report``, what a graph keeps."""

from .report import MemoryReport as MemoryReport
from .report import report as report
