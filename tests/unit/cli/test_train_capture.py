"""``ember train --capture``: the same run as without it on a CPU backend; fp16 is refused."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ember.cli.main import main

FIXTURE = Path(__file__).parents[2] / "fixtures" / "tiny.txt"
GPT = [
    "train", "--model", "gpt", "--text", str(FIXTURE), "--iters", "6", "--eval-interval", "3",
    "--eval-iters", "2", "--block-size", "16", "--n-layer", "1", "--n-head", "2", "--n-embd",
    "16", "--batch-size", "4", "--warmup-iters", "2", "--display", "none", "--device", "cpu",
]  # fmt: skip


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def test_capture_trains_as_eager(tmp_path: Path) -> None:
    assert main([*GPT, "--output", str(tmp_path / "eager")]) == 0
    assert main([*GPT, "--capture", "--output", str(tmp_path / "captured")]) == 0
    eager, captured = _rows(tmp_path / "eager"), _rows(tmp_path / "captured")
    assert len(eager) == len(captured) == 2
    for a, b in zip(eager, captured):
        assert a["train_loss"] == b["train_loss"] and a["valid_loss"] == b["valid_loss"]


def test_capture_with_fp16_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*GPT, "--capture", "--precision", "fp16"])
    assert info.value.code == 2
    assert "--capture records fp32 or bf16" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "device", "precision", "devices", "want"),
    [
        ("gpt", "cuda", "bf16", None, True),
        ("gpt", "cuda", "fp32", None, True),
        ("gpt", "cuda", "fp16", None, False),  # the loss scaler reads the host every step
        ("gpt", "cuda", "bf16", "cuda:0,cuda:1", False),
        ("cnn", "cuda", "fp32", None, False),
        ("gpt", "cpu", "fp32", None, False),
    ],
)
def test_capture_defaults_on_for_gpt_on_one_cuda_device(
    model: str, device: str, precision: str, devices: str | None, want: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import argparse
    from types import SimpleNamespace

    from ember.cli import tasks, train

    # CUDA is not needed to decide: the device's kind is all the default reads
    monkeypatch.setattr(
        tasks, "device_of", lambda spec, **kw: SimpleNamespace(is_cuda=spec.startswith("cuda"))
    )
    args = argparse.Namespace(model=model, device=device, precision=precision, devices=devices)
    assert train.default_capture(args) is want
