"""Strategies spelled as text (``ember train --checkpointing``) and ``Learner(checkpointing=)``."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember import nn
from ember.checkpoint.spelling import parse_strategy
from ember.cli.main import main
from ember.data import ArrayDataset, DataLoader
from ember.train import Learner

Strategy = em.GradientCheckpointingStrategy


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("disabled", Strategy.Disabled),
        ("Balanced", Strategy.Balanced),
        ("budget:0.4", Strategy.budget(fraction=0.4)),
        ("budget:1", Strategy.budget(fraction=1.0)),
        ("budget:512MiB", Strategy.budget(bytes=512 * 2**20)),
        ("budget:2GB", Strategy.budget(bytes=2 * 10**9)),
        ("budget:4096", Strategy.budget(bytes=4096)),
    ],
)
def test_spellings(text: str, want: Strategy) -> None:
    assert parse_strategy(text) == want


@pytest.mark.parametrize("text", ["", "full", "budget:", "budget:abc", "budget:3furlongs"])
def test_bad_spellings(text: str) -> None:
    with pytest.raises(em.AutodiffError, match="checkpointing: expected one of"):
        parse_strategy(text)


def test_out_of_range_fraction_names_the_range() -> None:
    with pytest.raises(em.AutodiffError, match=r"fraction in \(0, 1\]"):
        parse_strategy("budget:1.5")


class _Net(nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 32, device=device)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.fc2(self.drop(nn.functional.gelu(self.fc1(x)).tanh()))


def _fit(checkpointing: object) -> tuple[list[float], object]:
    em.seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    train = DataLoader(ArrayDataset(x, y), batch_size=16, shuffle=True, seed=1, prefetch=0)
    model = _Net(em.Device.cpu().autodiff())
    learner = Learner(
        model,
        em.optim.Adam(),
        lr=0.01,
        display="none",
        checkpointing=checkpointing,  # type: ignore[arg-type]
    )
    hist = learner.fit(train, epochs=2)
    strategy = next(learner.model.parameters()).val().gradient_checkpointing_strategy()
    return [r["train_loss"] for r in hist], strategy


def test_learner_takes_strategies_and_spellings() -> None:
    plain, s_plain = _fit(False)
    assert s_plain is Strategy.Disabled
    for given, want in [
        ("balanced", Strategy.Balanced),
        ("budget:0.5", Strategy.budget(fraction=0.5)),
        (Strategy.budget(fraction=0.3), Strategy.budget(fraction=0.3)),
    ]:
        losses, s = _fit(given)
        assert s == want
        assert losses == plain, given  # gradients are exact under every strategy


def test_learner_rejects_a_bad_spelling_at_once() -> None:
    with pytest.raises(em.AutodiffError, match="checkpointing: expected one of"):
        Learner(_Net(em.Device.cpu().autodiff()), em.optim.SGD(), checkpointing="sometimes")


def test_ember_train_checkpointing_option(tmp_path: Path) -> None:
    """``ember train --model gpt --checkpointing budget:0.5`` (and balanced) log the same losses
    as disabled; a bad spelling is a usage error."""
    fixture = Path(__file__).parents[2] / "fixtures" / "tiny.txt"
    base = ["train", "--model", "gpt", "--text", str(fixture), "--iters", "4"]
    base += ["--eval-interval", "2", "--eval-iters", "1", "--block-size", "16", "--n-layer", "2"]
    base += ["--n-head", "2", "--n-embd", "16", "--batch-size", "4", "--warmup-iters", "1"]
    base += ["--display", "none", "--device", "cpu"]
    rows = {}
    for mode in ("disabled", "balanced", "budget:0.5"):
        out = tmp_path / mode.replace(":", "_")
        assert main([*base, "--checkpointing", mode, "--output", str(out)]) == 0
        with open(out / "metrics.csv") as f:
            rows[mode] = [(r["train_loss"], r["valid_loss"]) for r in csv.DictReader(f)]
    assert rows["disabled"] and rows["balanced"] == rows["disabled"]
    assert rows["budget:0.5"] == rows["disabled"]
    with pytest.raises(SystemExit):
        main([*base, "--checkpointing", "budget:lots", "--output", str(tmp_path / "bad")])
