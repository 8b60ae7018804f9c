"""The ``ember`` command line end to end: train, eval, resume, generate, info, bench, bad usage."""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ember.cli.main import main
from ember.cli.schedule import RunSchedule

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


def _strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN and Infinity (not JSON)."""

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


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


def test_resume_with_more_epochs_continues_the_lr_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = ["train", "--model", "mlp", "--display", "none", "--batch-size", "64"]  # 21 steps/epoch
    assert main([*args, "--epochs", "3", "--output", str(run)]) == 0
    old = RunSchedule.from_plan(json.loads((run / "config.json").read_text())["lr_schedule"])
    # killed during epoch 2 of the 3 planned, then resumed with 4 planned
    for name in ("epoch-0002", "epoch-0003"):
        shutil.rmtree(run / "records" / name)
    (run / "model.safetensors").unlink()
    assert main(["train", "--resume", str(run), "--epochs", "4", "--display", "plain"]) == 0
    assert "the learning rate continues from" in capsys.readouterr().out
    plan = json.loads((run / "config.json").read_text())["lr_schedule"]
    assert plan["total_steps"] == 63 and plan["changes"] == [[21, 84]]
    new = RunSchedule.from_plan(plan)
    assert [new.rate(s) for s in range(22)] == [old.rate(s) for s in range(22)]  # no jump
    rates = [new.rate(s) for s in range(85)]
    assert all(a > b for a, b in itertools.pairwise(rates))  # one decay to --min-lr at step 84
    assert rates[-1] == pytest.approx(plan["min_lr"], rel=1e-12)
    for epoch in (2, 3, 4):  # what the resumed run used is what the schedule gives
        state = json.loads((run / "records" / f"epoch-{epoch:04d}" / "state.json").read_text())
        assert state["lr"] == new.rate(state["steps"] - 1)
    lrs = [float(r["lr"]) for r in _rows(run)]
    assert len(lrs) == 4 and all(a > b for a, b in itertools.pairwise(lrs))
    # the same --epochs again changes nothing: the saved plan is rebuilt as it was
    assert main(["train", "--resume", str(run), "--epochs", "4"]) == 0
    assert json.loads((run / "config.json").read_text())["lr_schedule"] == plan


@pytest.mark.filterwarnings("ignore:(overflow|invalid value) encountered")  # NumPy, diverging
def test_divergence_stops_training_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["train", "--model", "mlp", "--epochs", "1", "--lr", "1e30", "--batch-size", "64"]
    base += ["--display", "none"]
    out = tmp_path / "diverged"
    assert main([*base, "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert re.search(
        r"ember train: error: the training loss became non-finite \((nan|inf|-inf)\) at "
        r"epoch 1 step \d+ \(batch \d+ of 21\); lower --lr .* pass --allow-nonfinite",
        err,
    ), err
    for name in ("model.safetensors", "best.safetensors", "records", "summary.json"):
        assert not (out / name).exists(), name

    on = tmp_path / "allowed"
    assert main([*base, "--allow-nonfinite", "--output", str(on)]) == 0
    summary = _strict_json((on / "summary.json").read_text())
    assert summary["steps"] == 21 and summary["test_loss"] is None
    assert not (on / "best.safetensors").exists()  # a diverged epoch is never the best
    for line in (on / "metrics.jsonl").read_text().splitlines():
        _strict_json(line)
    capsys.readouterr()
    assert main(["eval", str(on), "--json"]) == 0
    assert _strict_json(capsys.readouterr().out)["test_loss"] is None


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
    # more --iters on resume: one more epoch of 3 steps, the lr curve continued from step 6
    assert main(["train", "--resume", str(out), "--iters", "9", "--display", "none"]) == 0
    assert len(_rows(out)) == 3
    assert json.loads((out / "config.json").read_text())["lr_schedule"]["changes"] == [[6, 9]]


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
        (["train", "--model", "gpt", "--n-embd", "10", "--n-head", "3"], "does not divide"),
        (["train", "--lr", "0"], "expected a positive number, got 0"),
        (["train", "--lr", "-0.1"], "expected a positive number, got -0.1"),
        (["train", "--lr", "nan"], "expected a positive number, got nan"),
        (["train", "--lr", "inf"], "expected a positive number, got inf"),
        (["train", "--min-lr", "-1"], "expected a number >= 0, got -1"),
        (["train", "--min-lr", "0.1", "--lr", "0.01"], "--min-lr 0.1 is above --lr 0.01"),
        (["train", "--model", "gpt", "--min-lr", "0.01"], "--min-lr 0.01 is above --lr 0.001"),
        (["train", "--warmup-iters", "-1"], "expected an integer >= 0, got -1"),
        (
            ["train", "--model", "gpt", "--iters", "10", "--warmup-iters", "10"],
            "--warmup-iters 10 is not shorter than the run's 10 optimizer steps",
        ),
        (
            ["train", "--model", "mlp", "--epochs", "1", "--warmup-iters", "41"],
            "--warmup-iters 41 is not shorter than the run's 41 optimizer steps",
        ),
        (["train", "--resume", "runs/x", "--lr", "0.1"], "--lr cannot change"),
        (["train", "--resume", "runs/x", "--warmup-iters", "5"], "--warmup-iters cannot change"),
        (["eval", "/no/such/run"], "does not exist"),
        (["bench", "everything"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_arguments_are_usage_errors(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a run directory claimed before the error lands here
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
