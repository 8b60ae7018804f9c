"""Metrics, the displays and the metric logs."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember.train import (
    Accuracy,
    LearningRate,
    Loss,
    MetricLog,
    Perplexity,
    PlainDisplay,
    StepOutput,
    TerminalDisplay,
    TopKAccuracy,
    make_display,
    plot_curves,
)
from ember.train import logging as train_logging

LOGITS = np.array([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4], [0.2, 0.3, 0.5], [0.9, 0.05, 0.05]])
TARGETS = np.array([1, 2, 0, 0])


def test_loss_is_weighted_by_batch_size() -> None:
    m = Loss()
    m.update(StepOutput(1.0, 2))
    m.update(StepOutput(4.0, 1))
    assert m.compute() == pytest.approx(2.0)
    m.reset()
    assert math.isnan(m.compute())


def test_accuracy_and_top_k() -> None:
    acc, top2 = Accuracy(), TopKAccuracy(2)
    out = StepOutput(0.0, 4, LOGITS, TARGETS)
    acc.update(out)
    top2.update(out)
    assert acc.compute() == pytest.approx(0.5)  # rows 0 and 3
    assert top2.compute() == pytest.approx(0.75)  # row 1's label 2 is second; row 2's is not
    assert acc.name == "accuracy" and top2.name == "top2_accuracy"
    seq = StepOutput(0.0, 1, LOGITS.reshape(1, 4, 3), TARGETS.reshape(1, 4))
    flat = Accuracy()
    flat.update(seq)
    assert flat.compute() == pytest.approx(0.5)


def test_perplexity_and_lr() -> None:
    p = Perplexity()
    p.update(StepOutput(math.log(5.0), 3))
    assert p.compute() == pytest.approx(5.0)
    lr = LearningRate()
    lr.update(StepOutput(0.0, 1, lr=0.1))
    lr.update(StepOutput(0.0, 1))
    assert lr.compute() == 0.1


def test_accuracy_needs_logits() -> None:
    with pytest.raises(em.ShapeError, match="no logits"):
        Accuracy().update(StepOutput(0.0, 1))


def test_plain_display_lines() -> None:
    s = io.StringIO()
    d = PlainDisplay(s, log_every=2)
    d.start_phase("train", 1, 3, 5)
    for k in range(1, 6):
        d.step(k, {"loss": 0.5})
    d.end_epoch({"epoch": 1.0, "train_loss": 0.25, "valid_accuracy": 0.9})
    lines = s.getvalue().splitlines()
    assert lines == [
        "epoch 1/3 train 2/5 loss 0.5000",
        "epoch 1/3 train 4/5 loss 0.5000",
        "epoch 1/3 train_loss=0.2500 valid_accuracy=0.9000",
    ]


def test_terminal_display_bar_and_table() -> None:
    s = io.StringIO()
    d = TerminalDisplay(s)
    d.start_phase("train", 1, 2, 4)
    d.step(4, {"loss": 1.0})
    d.end_epoch({"epoch": 1.0, "train_loss": 1.0})
    d.end_epoch({"epoch": 2.0, "train_loss": 0.5})
    text = s.getvalue()
    assert "\r" in text and "4/4" in text and "█" * 24 in text
    lines = [line.split("\r")[-1].replace("\x1b[K", "").split() for line in text.split("\n")]
    table = [cells for cells in lines if cells and cells[0] in ("epoch", "1", "2")]
    assert table == [["epoch", "loss"], ["1", "1.0000"], ["2", "0.5000"]]  # one header


def test_make_display_auto_is_plain_off_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(make_display("auto", io.StringIO()), PlainDisplay)
    assert isinstance(make_display("auto", Tty()), TerminalDisplay)
    with pytest.raises(ValueError, match="expected"):
        make_display("fancy")


def test_metric_log_csv_and_jsonl(tmp_path: Path) -> None:
    log = MetricLog(tmp_path)
    log.append({"epoch": 1.0, "train_loss": 0.5})
    log.append({"epoch": 2.0, "train_loss": 0.25, "valid_loss": float("nan")})
    csv_lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert csv_lines[0] == "epoch,train_loss,valid_loss" and len(csv_lines) == 3
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[1] == {"epoch": 2.0, "train_loss": 0.25, "valid_loss": None}


def test_curves_skip_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_logging, "has_matplotlib", lambda: False)
    rows = [{"epoch": 1.0, "train_loss": 1.0}, {"epoch": 2.0, "train_loss": 0.5}]
    assert plot_curves(rows, tmp_path / "curves.png") is None
    assert not (tmp_path / "curves.png").exists()


def test_curves_png_with_matplotlib(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [{"epoch": 1.0, "train_loss": 1.0, "valid_accuracy": 0.5}]
    assert plot_curves(rows, tmp_path / "curves.png") == tmp_path / "curves.png"
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
