"""``ember train --resume`` and ``ember eval`` after a crash inside a record save."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ember.cli.main import main


def test_resume_and_eval_skip_a_partial_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = ["train", "--model", "mlp", "--display", "plain", "--batch-size", "64", "--epochs", "2"]
    assert main([*args, "--output", str(run)]) == 0
    records = run / "records"
    # killed while saving epoch 2: its record is a .tmp with a half-written state.json
    partial = records / "epoch-0002.tmp"
    (records / "epoch-0002").rename(partial)
    text = (partial / "state.json").read_text()
    (partial / "state.json").write_text(text[: len(text) // 2])
    (run / "model.safetensors").unlink()
    capsys.readouterr()
    assert main(["eval", str(run), "--json"]) == 0  # the newest complete record: epoch 1
    assert json.loads(capsys.readouterr().out)["weights"].endswith(
        "epoch-0001/training.safetensors"
    )
    # a damaged newest record is skipped too, with a line saying so
    damaged = records / "epoch-0001" / "training.safetensors"
    shutil.copytree(records / "epoch-0001", records / "epoch-0000")
    data = bytearray(damaged.read_bytes())
    data[-1] ^= 0x01
    damaged.write_bytes(bytes(data))
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "skipping damaged record epoch-0001" in out
    assert "continuing from epoch-0000" in out
    assert sorted(p.name for p in records.iterdir()) == ["epoch-0000", "epoch-0001", "epoch-0002"]
    assert (run / "model.safetensors").exists()
