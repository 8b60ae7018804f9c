"""``ember train --resume`` of a GPT with dropout continues the uninterrupted run bit for bit
(the run directory's ``state.json`` holds ``em.get_rng_state()`` and the loader position)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from ember.cli.main import main
from ember.record import read_pytorch

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny.txt"


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def test_gpt_with_dropout_resumes_bit_for_bit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = tmp_path / "full"
    args = [
        "train", "--model", "gpt", "--text", str(FIXTURE), "--iters", "6",
        "--eval-interval", "2", "--eval-iters", "1", "--block-size", "16", "--n-layer", "1",
        "--n-head", "2", "--n-embd", "16", "--batch-size", "4", "--dropout", "0.3",
        "--device", "cpu", "--display", "none",
    ]  # fmt: skip
    assert main([*args, "--output", str(full)]) == 0
    # a run killed during the third epoch: the records of epochs 1 and 2 exist
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "records" / "epoch-0003")
    (part / "model.safetensors").unlink()
    assert main(["train", "--resume", str(part), "--display", "none"]) == 0
    keys = ("train_loss", "valid_loss", "lr")
    assert [[r[k] for k in keys] for r in _rows(part)] == [
        [r[k] for k in keys] for r in _rows(full)
    ]
    assert len(_rows(part)) == 3
    got, want = (read_pytorch(d / "model.safetensors") for d in (part, full))
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    capsys.readouterr()
