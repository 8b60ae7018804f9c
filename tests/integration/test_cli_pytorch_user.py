"""Issue 18's CLI cases: GPT heads that fit any --n-embd, the dataset name of --text runs,
--precision, the default device, and the validation split carved from the training images."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from ember.cli import tasks
from ember.cli.main import main
from ember.cli.train import default_heads

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny.txt"
TINY_GPT = [
    "--iters", "2", "--eval-interval", "2", "--eval-iters", "1", "--block-size", "8",
    "--batch-size", "2", "--display", "plain", "--device", "cpu",
]  # fmt: skip


def test_readme_gpt_line_derives_the_heads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ember train --model gpt --text f.txt --n-layer 2 --n-embd 64` exited 2 (6 heads)."""
    out = tmp_path / "gpt"
    args = ["train", "--model", "gpt", "--text", str(FIXTURE), "--n-layer", "2", "--n-embd", "64"]
    assert main([*args, *TINY_GPT, "--output", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model"]["args"]["n_head"] == 4
    # the dataset is the text file, never "shakespeare"
    assert config["dataset"] == "text" and config["cli"]["dataset"] == "text"
    assert config["cli"]["text"] == str(FIXTURE)
    banner = capsys.readouterr().out.splitlines()[0]
    assert f"gpt on text {FIXTURE}" in banner and "shakespeare" not in banner
    assert main(["eval", str(out), "--json"]) == 0  # a text run evaluates on its text
    assert json.loads(capsys.readouterr().out)["dataset"] == "text"


@pytest.mark.parametrize(
    ("n_embd", "heads"), [(384, 6), (64, 4), (96, 6), (10, 5), (7, 1), (20, 5), (128, 4)]
)
def test_default_heads_divide_the_width(n_embd: int, heads: int) -> None:
    assert default_heads(n_embd) == heads and n_embd % heads == 0


def test_heads_that_do_not_divide_are_a_usage_error_with_a_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["train", "--model", "gpt", "--n-embd", "64", "--n-head", "6"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--n-head 6 does not divide --n-embd 64" in err
    assert "--n-head 1 | 2 | 4 | 8 | 16" in err and "leave --n-head out" in err


def test_default_device_is_torch_cpu_when_torch_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EMBER_DEVICE", raising=False)
    have_torch = importlib.util.find_spec("torch") is not None
    assert str(tasks.device_of(None)) == ("torch:cpu" if have_torch else "cpu")
    assert str(tasks.device_of("cpu")) == "cpu"  # --device wins
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert str(tasks.device_of(None)) == "cpu"  # no torch: the NumPy backend
    monkeypatch.setenv("EMBER_DEVICE", "cpu")
    assert str(tasks.device_of(None)) == "cpu"  # EMBER_DEVICE wins over the default


def test_validation_split_is_carved_from_the_training_images() -> None:
    device = tasks.device_of("cpu")
    train, valid, test = tasks.image_loaders("digits", 32, 0, device)
    n = len(tasks.image_split("digits", "train"))
    assert (len(train.dataset), len(valid.dataset), len(test.dataset)) == (n - 144, 144, 359)
    fit_idx, valid_idx = tasks.validation_split(n, 0)
    assert set(fit_idx).isdisjoint(valid_idx) and len(set(fit_idx) | set(valid_idx)) == n
    again = tasks.validation_split(n, 0)  # seeded: a resume carves the same split
    assert np.array_equal(again[1], valid_idx)
    assert not np.array_equal(tasks.validation_split(n, 1)[1], valid_idx)


def test_image_run_reports_the_best_epoch_on_the_test_split_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["train", "--model", "mlp", "--epochs", "3", "--device", "cpu", "--display", "plain"]
    assert main([*args, "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1294 train / 144 validation images" in text
    assert text.count("test accuracy") == 1 and "test_accuracy" not in text  # not per epoch
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    best = max(rows, key=lambda r: r["valid_accuracy"])
    assert summary["best_epoch"] == best["epoch"]
    assert summary["best_valid_accuracy"] == best["valid_accuracy"]
    # the test figure is the best epoch's weights on the 359 test images
    assert main(["eval", str(out), "--best", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["examples"] == 359
    assert result["test_accuracy"] == pytest.approx(summary["test_accuracy"])


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_precision_option_trains_in_mixed_precision(
    precision: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / precision
    args = ["train", "--model", "cnn", "--epochs", "1", "--device", "cpu", "--display", "plain"]
    assert main([*args, "--precision", precision, "--output", str(out)]) == 0
    assert f"device cpu, {precision}" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["cli"]["precision"] == precision
    state = json.loads((out / "records" / "epoch-0001" / "state.json").read_text())
    assert ("grad_scaler" in state) == (precision == "fp16")
    assert json.loads((out / "summary.json").read_text())["test_accuracy"] > 0.2
