"""``ember bench``: run a benchmark workload and print a table of medians and ratios.

The workloads are not part of the package: they live in the repository's ``bench/`` folder beside
the longer studies (``bench/RESULTS.md``). The command looks for that folder in
``$EMBER_BENCH_DIR`` when it is set, else beside the package source (``<checkout>/bench``, which
an editable or source-tree install has and a wheel does not); without it, the command prints one
``error:`` line naming where it looked. The folder goes on ``sys.path``, as it is for
``python bench/<script>.py``, and the workload's module is imported from it when the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import EmberError
from . import tasks

BENCH_DIR_ENV = "EMBER_BENCH_DIR"

# workload -> (module of the bench folder, keyword arguments of its ``run`` besides the device
# and the repeats)
WORKLOADS: dict[str, tuple[str, dict[str, str]]] = {
    "overhead": ("overhead", {}),
    "mlp": ("train_step", {"workload": "mlp"}),
    "cnn": ("train_step", {"workload": "cnn"}),
    "gpt": ("train_step", {"workload": "gpt"}),
    "checkpointing": ("checkpointing_gpt", {}),
}
BENCHES = tuple(WORKLOADS)

# the folder holding the ``ember`` package: the repository root in a checkout
_SOURCE_ROOT = Path(__file__).resolve().parents[2]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark ember against PyTorch / NumPy",
        description="Run one workload of the repository's bench/ folder (found through "
        f"{BENCH_DIR_ENV}, else beside the package source) in ember and in its references "
        "(PyTorch, hand-written NumPy where one exists), in one process; print medians and ratios.",
    )
    p.add_argument("workload", choices=BENCHES)
    p.add_argument("--device", help="cpu, torch:cpu, cuda or cuda:N (default: EMBER_DEVICE or cpu)")
    p.add_argument("--repeats", type=int, default=None, help="timed repetitions (median)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(run=run, parser=p)


def bench_dir() -> Path:
    """The benchmarks folder: ``$EMBER_BENCH_DIR`` if set, else ``bench/`` beside the package."""
    env = os.environ.get(BENCH_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return _SOURCE_ROOT / "bench"


def load_module(name: str) -> ModuleType:
    """Import module ``name`` of the benchmarks folder; ``EmberError`` naming the path looked at
    when the folder (or that file in it) is missing."""
    folder = bench_dir()
    path = folder / f"{name}.py"
    if not path.is_file():
        env = os.environ.get(BENCH_DIR_ENV)
        where = f"{BENCH_DIR_ENV}={env}" if env else f"beside the ember package in {_SOURCE_ROOT}"
        raise EmberError(
            f"benchmarks not found: {path} does not exist ({where}). The benchmarks ship with "
            "the source, not the wheel: run from a checkout of the ember repository "
            f"(pip install -e .) or set {BENCH_DIR_ENV} to its bench/ folder"
        )
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    module = importlib.import_module(name)
    found = Path(module.__file__ or "").resolve()
    if found != path.resolve():
        raise EmberError(
            f"benchmark module {name!r} was imported from {found}, not {path}: another module of "
            "that name was loaded first; run the command in a fresh process"
        )
    return module


def run_workload(name: str, device: Any, repeats: int | None) -> list[dict[str, Any]]:
    """Run workload ``name`` of ``WORKLOADS``: its module's ``run`` with the arguments it takes."""
    module_name, fixed = WORKLOADS[name]
    fn = load_module(module_name).run
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = dict(fixed)
    if "device" in params:
        kwargs["device"] = device
    if repeats is not None and "repeats" in params:
        kwargs["repeats"] = repeats
    rows: list[dict[str, Any]] = fn(**kwargs)
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
    device = tasks.device_of(args.device, prefer_torch=False)  # ember's NumPy backend
    rows = run_workload(args.workload, device, args.repeats)
    print(json.dumps(rows, indent=1) if args.json else format_table(rows))
    return 0
