"""``ember train --devices``: replicas in one process, and two Gloo ranks under ``torchrun``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from ember.cli.main import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny.txt"
GPT = [
    "train", "--model", "gpt", "--text", str(FIXTURE), "--iters", "3", "--batch-size", "4",
    "--block-size", "16", "--n-layer", "1", "--n-embd", "32", "--dropout", "0",
    "--eval-iters", "2", "--warmup-iters", "1", "--optimizer", "sgd", "--lr", "0.5",
    "--display", "none",
]  # fmt: skip


def _weights(run: Path) -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) for k, v in load_file(run / "model.safetensors").items()}


def _max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def _run(tmp: Path, name: str, *extra: str) -> dict[str, np.ndarray]:
    assert main([*GPT, *extra, "--output", str(tmp / name)]) == 0
    return _weights(tmp / name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_replica_devices_equal_one_device(tmp_path: Path, precision: str) -> None:
    one = _run(tmp_path, "one", "--device", "torch:cpu", "--precision", precision)
    two = _run(tmp_path, "two", "--devices", "torch:cpu,torch:cpu", "--precision", precision)
    init = _run(tmp_path, "init", "--device", "torch:cpu", "--lr", "1e-12", "--min-lr", "0")
    motion = _max_diff(one, init)
    assert motion > 0.05
    # fp32: the two half-batch gradients summed differ from the full-batch one by roundings;
    # bf16: each replica rounds its weight gradient to bf16 (8 bits) where one device rounds
    # the full-batch one.
    tol = 1e-5 if precision == "fp32" else 4 * 2.0**-8 * motion
    assert _max_diff(one, two) < tol
    config = json.loads((tmp_path / "two" / "config.json").read_text())
    assert config["cli"]["devices"] == "torch:cpu,torch:cpu"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--devices", "cpu,,cpu"], "an empty entry"),
        (["--devices", "ddp,cpu"], "ddp stands alone"),
        (["--devices", "cpu,gpu:0"], "entry 'gpu:0'"),
        (["--devices", "cpu,cpu", "--device", "cpu"], "pass one of them"),
        (["--devices", "cpu,cpu", "--capture"], "drop --capture"),
    ],
)
def test_bad_device_lists_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as e:
        main([*GPT, *args, "--output", str(tmp_path / "run")])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_ddp_outside_torchrun_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    assert main([*GPT, "--devices", "ddp", "--output", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "expected the variables torchrun sets" in err and "missing RANK" in err


def test_torchrun_two_gloo_ranks_equal_one_process(tmp_path: Path) -> None:
    """``torchrun --nproc_per_node=2 -m ember train``: rank 0 alone writes one run directory
    (rank 1 creates none), both ranks end with the same weights, and they equal one process
    training on the full batches."""
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    env.pop("EMBER_DEBUG", None)
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    launch += ["--master_addr=127.0.0.1", f"--master_port={_free_port()}", "-m", "ember"]
    r = subprocess.run(
        [*launch, *GPT, "--device", "torch:cpu", "--display", "plain"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1, runs  # no second directory from rank 1
    run = runs[0]
    assert (run / "records" / "epoch-0001" / "training.safetensors").is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["ranks_max_param_diff"] == 0.0
    assert r.stdout.count("ember train: gpt") == 1  # only rank 0 shows the display
    one = _run(tmp_path, "one", "--device", "torch:cpu")
    assert _max_diff(_weights(run), one) < 1e-5
    assert summary["train_loss"] == pytest.approx(
        json.loads((tmp_path / "one" / "summary.json").read_text())["train_loss"], rel=1e-5
    )
