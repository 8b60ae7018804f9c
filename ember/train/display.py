"""Progress display: live bars and a metrics table on a terminal, plain log lines otherwise."""

from __future__ import annotations

import math
import sys
import time
from typing import Protocol, TextIO

_BAR = 24
_MIN_REFRESH_S = 0.1

# short table headers, so a row fits a terminal
_SHORT = {
    "train_loss": "loss",
    "train_accuracy": "acc",
    "train_top5_accuracy": "top5",
    "train_perplexity": "ppl",
    "valid_loss": "val_loss",
    "valid_accuracy": "val_acc",
    "valid_top5_accuracy": "val_top5",
    "valid_perplexity": "val_ppl",
    "examples_per_s": "ex/s",
    "tokens_per_s": "tok/s",
    "time_s": "time_s",
}


def _fmt(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "-"
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.3g}"
    return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"


class Display(Protocol):
    """What the ``Learner`` reports to."""

    def start_phase(self, phase: str, epoch: int, epochs: int, total: int) -> None: ...

    def step(self, done: int, metrics: dict[str, float]) -> None: ...

    def end_epoch(self, row: dict[str, float]) -> None: ...

    def message(self, text: str) -> None: ...


class SilentDisplay:
    """Reports nothing."""

    def start_phase(self, phase: str, epoch: int, epochs: int, total: int) -> None:
        return None

    def step(self, done: int, metrics: dict[str, float]) -> None:
        return None

    def end_epoch(self, row: dict[str, float]) -> None:
        return None

    def message(self, text: str) -> None:
        return None


class PlainDisplay:
    """One log line per epoch (and every ``log_every`` steps of long epochs), for logs and pipes."""

    def __init__(self, stream: TextIO | None = None, *, log_every: int = 0) -> None:
        self.stream = stream or sys.stdout
        self.log_every = log_every
        self.phase, self.epoch, self.epochs, self.total = "train", 0, 0, 0

    def start_phase(self, phase: str, epoch: int, epochs: int, total: int) -> None:
        self.phase, self.epoch, self.epochs, self.total = phase, epoch, epochs, total

    def step(self, done: int, metrics: dict[str, float]) -> None:
        if self.log_every and done % self.log_every == 0 and done < self.total:
            parts = " ".join(f"{k} {_fmt(v)}" for k, v in metrics.items())
            print(
                f"epoch {self.epoch}/{self.epochs} {self.phase} {done}/{self.total} {parts}",
                file=self.stream,
                flush=True,
            )

    def end_epoch(self, row: dict[str, float]) -> None:
        parts = " ".join(f"{k}={_fmt(v)}" for k, v in row.items() if k != "epoch")
        print(f"epoch {int(row['epoch'])}/{self.epochs} {parts}", file=self.stream, flush=True)

    def message(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class TerminalDisplay:
    """A progress bar rewritten in place while a phase runs, and a table row per epoch."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.columns: list[str] = []
        self.widths: list[int] = []
        self.phase, self.epoch, self.epochs, self.total = "train", 0, 0, 0
        self.t0 = time.perf_counter()
        self.last = 0.0

    def start_phase(self, phase: str, epoch: int, epochs: int, total: int) -> None:
        self.phase, self.epoch, self.epochs, self.total = phase, epoch, epochs, total
        self.t0 = time.perf_counter()
        self.last = 0.0

    def step(self, done: int, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        if done < self.total and now - self.last < _MIN_REFRESH_S:
            return
        self.last = now
        frac = done / self.total if self.total else 1.0
        filled = round(frac * _BAR)
        bar = "█" * filled + "·" * (_BAR - filled)
        elapsed = now - self.t0
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        parts = "  ".join(f"{k} {_fmt(v)}" for k, v in metrics.items())
        label = f"{self.phase:5s} {self.epoch}/{self.epochs}" if self.epochs else self.phase
        line = f"\r{label} {bar} {done}/{self.total} {elapsed:5.1f}s<{eta:4.1f}s  {parts}"
        self.stream.write(line + "\x1b[K")
        self.stream.flush()

    def end_epoch(self, row: dict[str, float]) -> None:
        self.stream.write("\r\x1b[K")
        if not self.columns:
            self.columns = list(row)
            self.widths = [max(len(_SHORT.get(c, c)), 8) for c in self.columns]
            heads = [f"{_SHORT.get(c, c):>{w}s}" for c, w in zip(self.columns, self.widths)]
            self.stream.write(" ".join(heads) + "\n")
        cells = [
            f"{_fmt(int(v) if c == 'epoch' else v):>{w}s}"
            for c, w in zip(self.columns, self.widths)
            for v in [row.get(c, math.nan)]
        ]
        self.stream.write(" ".join(cells))
        self.stream.write("\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        self.stream.write("\r\x1b[K" + text + "\n")
        self.stream.flush()


def make_display(kind: str = "auto", stream: TextIO | None = None) -> Display:
    """``"auto"`` (a live display on a terminal, plain lines otherwise), ``"tty"``, ``"plain"``,
    or ``"none"``."""
    s = stream or sys.stdout
    if kind == "auto":
        kind = "tty" if s.isatty() else "plain"
    if kind == "tty":
        return TerminalDisplay(s)
    if kind == "plain":
        return PlainDisplay(s)
    if kind == "none":
        return SilentDisplay()
    raise ValueError(f"make_display: expected 'auto', 'tty', 'plain' or 'none', got {kind!r}.")
