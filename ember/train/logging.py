"""Metric logs (CSV and JSON lines) and training curves (PNG when matplotlib is installed)."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from collections.abc import Sequence
from pathlib import Path


class MetricLog:
    """Appends one row per epoch to ``metrics.csv`` and ``metrics.jsonl`` in ``directory``.

    The CSV header is the union of the columns seen so far; it is rewritten when a new column
    appears, so the file always parses. The JSON lines are strict JSON: a NaN or infinite value
    is written as ``null`` (the CSV keeps ``nan``/``inf``).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.csv_path = self.directory / "metrics.csv"
        self.jsonl_path = self.directory / "metrics.jsonl"
        self.rows: list[dict[str, float]] = []

    def restore(self, rows: Sequence[dict[str, float]]) -> None:
        """Start from ``rows`` (after a resume) and rewrite both files from them."""
        self.rows = [dict(r) for r in rows]
        self._rewrite()

    def append(self, row: dict[str, float]) -> None:
        self.rows.append(dict(row))
        self._rewrite()

    def _rewrite(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        columns: list[str] = []
        for r in self.rows:
            columns += [k for k in r if k not in columns]
        with open(self.csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns)
            w.writeheader()
            for r in self.rows:
                w.writerow(r)
        with open(self.jsonl_path, "w") as f:
            for r in self.rows:
                clean = {
                    k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                    for k, v in r.items()
                }
                f.write(json.dumps(clean, allow_nan=False) + "\n")


def has_matplotlib() -> bool:
    """True when matplotlib can be imported (it is optional)."""
    return importlib.util.find_spec("matplotlib") is not None


def plot_curves(rows: Sequence[dict[str, float]], path: Path) -> Path | None:
    """Save loss and accuracy curves per epoch as a PNG at ``path``.

    Returns:
        ``path``, or None when matplotlib is not installed (the curves are then only in the
        CSV/JSON logs).
    """
    if not rows or not has_matplotlib():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [r["epoch"] for r in rows]
    groups = [
        ("loss", ["train_loss", "valid_loss"]),
        ("accuracy", ["train_accuracy", "valid_accuracy"]),
    ]
    groups = [(t, [k for k in ks if k in rows[0]]) for t, ks in groups]
    groups = [(t, ks) for t, ks in groups if ks]
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 3.5), squeeze=False)
    for ax, (title, keys) in zip(axes[0], groups):
        for k in keys:
            ax.plot(epochs, [r.get(k, math.nan) for r in rows], marker="o", label=k)
        ax.set_xlabel("epoch")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
