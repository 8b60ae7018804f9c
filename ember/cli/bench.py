"""``ember bench``: run a benchmark workload and print a table of medians and ratios."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
from typing import Any

from . import tasks

BENCHES = ("overhead", "mlp", "cnn", "gpt", "checkpointing")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark ember against PyTorch / NumPy",
        description="Run one workload of ember/bench in ember and in its references (PyTorch, "
        "hand-written NumPy where one exists), in one process; print medians and ratios.",
    )
    p.add_argument("workload", choices=BENCHES)
    p.add_argument("--device", help="cpu, torch:cpu, cuda or cuda:N (default: EMBER_DEVICE or cpu)")
    p.add_argument("--repeats", type=int, default=None, help="timed repetitions (median)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(run=run, parser=p)


def run_workload(name: str, device: Any, repeats: int | None) -> list[dict[str, Any]]:
    """Import ``ember.bench.<name>`` and call its ``run`` with the arguments it accepts."""
    module = importlib.import_module(f"ember.bench.{name}")
    params = inspect.signature(module.run).parameters
    kwargs: dict[str, Any] = {}
    if "device" in params:
        kwargs["device"] = device
    if repeats is not None and "repeats" in params:
        kwargs["repeats"] = repeats
    rows: list[dict[str, Any]] = module.run(**kwargs)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """Rows as aligned text tables, one per distinct set of columns."""
    if not rows:
        return "(no rows)"
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r), []).append(r)
    return "\n\n".join(_table(list(cols), group) for cols, group in groups.items())


def _table(cols: list[str], rows: list[dict[str, Any]]) -> str:

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    device = tasks.device_of(args.device)
    rows = run_workload(args.workload, device, args.repeats)
    print(json.dumps(rows, indent=1) if args.json else format_table(rows))
    return 0
