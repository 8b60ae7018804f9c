"""The ``ember`` command line end to end: train, eval, resume, generate, info, bench, bad usage."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ember.cli.main import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny.txt"


def _ember(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EMBER_DEVICE": "cpu"}
    env.pop("EMBER_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def test_train_one_epoch_then_eval(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = _ember("train", "--epochs", "1", "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert "test accuracy" in r.stdout and "epoch 1/1" in r.stdout
    for name in (
        "config.json",
        "model.safetensors",
        "metrics.csv",
        "metrics.jsonl",
        "summary.json",
        "records/epoch-0001/training.safetensors",
    ):
        assert (out / name).exists(), name
    assert "matplotlib is not installed" in r.stdout or (out / "curves.png").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_accuracy"] > 0.3  # chance is 0.1

    r = _ember("eval", str(out), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["test_accuracy"] == pytest.approx(summary["test_accuracy"])
    assert result["examples"] == 359
    r = _ember("eval", str(out / "records" / "epoch-0001"), "--split", "train", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["examples"] == 1438


@pytest.mark.slow
def test_default_run_reaches_97_percent(tmp_path: Path) -> None:
    r = _ember("train", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    print(f"default run: test accuracy {summary['test_accuracy']:.4f} in {summary['time_s']:.1f}s")
    assert summary["test_accuracy"] >= 0.97


def test_cli_resume_reproduces_uninterrupted_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = tmp_path / "full"
    args = ["train", "--model", "mlp", "--display", "none", "--batch-size", "64", "--epochs", "3"]
    assert main([*args, "--output", str(full)]) == 0
    # simulate a run killed during epoch 3: only the records of epochs 1 and 2 exist
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "records" / "epoch-0003")
    (part / "model.safetensors").unlink()
    assert main(["train", "--resume", str(part)]) == 0
    keys = ("train_loss", "valid_loss", "valid_accuracy", "lr")
    assert [[r[k] for k in keys] for r in _rows(part)] == [
        [r[k] for k in keys] for r in _rows(full)
    ]
    assert len(_rows(part)) == 3 and (part / "model.safetensors").exists()
    capsys.readouterr()


def test_checkpointing_balanced_matches_disabled(tmp_path: Path) -> None:
    base = ["train", "--model", "cnn", "--epochs", "1", "--display", "none"]
    for mode in ("disabled", "balanced"):
        assert main([*base, "--checkpointing", mode, "--output", str(tmp_path / mode)]) == 0
    a, b = _rows(tmp_path / "disabled"), _rows(tmp_path / "balanced")
    assert a[0]["train_loss"] == b[0]["train_loss"] and a[0]["valid_loss"] == b[0]["valid_loss"]


def test_early_stopping_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--model",
            "mlp",
            "--display",
            "none",
            "--lr",
            "1e-12",
            "--epochs",
            "8",
            "--patience",
            "1",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    assert len(_rows(out)) < 8


def test_gpt_train_and_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gpt"
    args = [
        "train",
        "--model",
        "gpt",
        "--text",
        str(FIXTURE),
        "--iters",
        "6",
        "--eval-interval",
        "3",
        "--eval-iters",
        "2",
        "--block-size",
        "16",
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--n-embd",
        "16",
        "--batch-size",
        "4",
        "--warmup-iters",
        "2",
        "--display",
        "plain",
        "--output",
        str(out),
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "val loss" in text and "valid_perplexity" in text and "best" in text
    assert (out / "best.safetensors").exists()
    assert json.loads((out / "summary.json").read_text())["best_val_loss"] > 0
    assert len(_rows(out)) == 2
    assert main(["generate", str(out), "--tokens", "30", "--seed", "0", "--prompt", "All"]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("All") and len(sample.rstrip("\n")) >= 33
    assert main(["eval", str(out), "--json"]) == 0
    assert "val_loss" in json.loads(capsys.readouterr().out)
    assert main(["eval", str(out), "--best", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weights"].endswith("best.safetensors")


def test_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "ember 0.1.0" in text and "numpy" in text and "devices: cpu" in text
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == "ember 0.1.0"


def test_bench_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "mlp", "--repeats", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["bench"] for r in rows] == ["mlp_train_step"] * 2
    assert {r["reference"] for r in rows} == {"torch eager (cpu)", "hand-written numpy"}
    assert all(r["ember_ms"] > 0 and r["ratio"] > 0 for r in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--epochs", "0"], "expected a positive integer"),
        (["train", "--model", "gpt", "--dataset", "digits"], "does not fit"),
        (["train", "--dataset", "cifar"], "invalid choice"),
        (["train", "--lr", "abc"], "invalid _positive_float value"),
        (["train", "--model", "gpt", "--n-embd", "10", "--n-head", "3"], "multiple of"),
        (["eval", "/no/such/run"], "does not exist"),
        (["bench", "everything"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_arguments_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: ember" in err and message in err


def test_runtime_failures_print_one_line(tmp_path: Path) -> None:
    r = _ember("train", "--device", "tpu", "--output", str(tmp_path / "x"))
    assert r.returncode == 1
    assert "ember train: error:" in r.stderr and "Traceback" not in r.stderr
    r = _ember("eval", str(tmp_path))
    assert r.returncode == 1 and "config.json" in r.stderr and "Traceback" not in r.stderr


def test_bench_table_groups_rows_by_columns() -> None:
    from ember.cli.bench import format_table

    text = format_table([{"bench": "a", "ms": 1.5}, {"bench": "b", "ms": None}, {"x": 2}])
    first, second = text.split("\n\n")
    assert first.splitlines()[0].split() == ["bench", "ms"]
    assert first.splitlines()[2].split() == ["a", "1.500"]
    assert first.splitlines()[3].split() == ["b", "-"]
    assert second.splitlines()[0].split() == ["x"]
