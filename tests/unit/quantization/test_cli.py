"""``ember quantize RUN_DIR`` writes model.int8.safetensors; ``ember eval`` and ``ember
generate`` read it; the quantized GPT's loss (its int8 head) is the dequantized head's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember.cli.main import main
from ember.models.gpt import GPT, GPTConfig

FIXTURE = Path(__file__).parents[2] / "fixtures" / "tiny.txt"
TRAIN = [
    "train", "--model", "gpt", "--text", str(FIXTURE), "--iters", "4", "--eval-interval", "2",
    "--eval-iters", "2", "--block-size", "16", "--n-layer", "1", "--n-head", "2", "--n-embd",
    "32", "--batch-size", "4", "--warmup-iters", "1", "--display", "none", "--device", "cpu",
]  # fmt: skip


def test_quantize_then_eval_and_generate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main([*TRAIN, "--output", str(run)]) == 0
    capsys.readouterr()
    assert main(["quantize", str(run)]) == 0
    report = capsys.readouterr().out
    assert "weights quantized" in report
    int8 = run / "model.int8.safetensors"
    assert int8.is_file() and int8.stat().st_size < (run / "model.safetensors").stat().st_size
    assert main(["eval", str(int8), "--json"]) == 0
    q = json.loads(capsys.readouterr().out)
    assert main(["eval", str(run), "--json"]) == 0
    f = json.loads(capsys.readouterr().out)
    assert q["weights"].endswith("model.int8.safetensors")
    assert abs(q["val_loss"] - f["val_loss"]) < 0.05  # per-channel int8 of a tiny model
    assert main(["generate", str(int8), "--tokens", "12", "--seed", "0"]) == 0
    assert len(capsys.readouterr().out) >= 12


@pytest.mark.parametrize("bad", ["block:0", "row", "block:x"])
def test_bad_granularity_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["quantize", str(tmp_path), "--granularity", bad])
    assert info.value.code == 2


def test_gpt_loss_with_a_quantized_head_equals_the_dequantized_head() -> None:
    cfg = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.0)
    em.seed(1)
    gpt = GPT(cfg).valid()
    em.quantization.quantize(gpt, em.QuantScheme(granularity=("channel", 0)))
    rng = np.random.default_rng(2)
    idx = em.tensor(rng.integers(0, 13, (2, 8)))
    tgt = em.tensor(rng.integers(0, 13, (2, 8)))
    logits = gpt(idx)
    want = em.nn.functional.cross_entropy(logits.reshape((-1, 13)), tgt.reshape((-1,)))
    np.testing.assert_allclose(gpt.loss(idx, tgt).item(), want.item(), rtol=1e-6)
