"""``ember eval``: evaluate a trained model (a run directory or record) on a dataset split."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import tasks


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a trained model on a dataset",
        description="Evaluate the model of an `ember train` run on a dataset split.",
    )
    p.add_argument("path", type=Path, help="run directory, record directory or weights file")
    p.add_argument("--dataset", choices=tasks.DATASETS, help="default: the run's dataset")
    p.add_argument(
        "--split",
        choices=("train", "test"),
        default="test",
        help="image split (text runs use their validation text)",
    )
    p.add_argument("--device", help="cpu, torch:cpu, cuda or cuda:N")
    p.add_argument("--best", action="store_true", help="use best.safetensors (best validation)")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument(
        "--json", action="store_true", help="print the metrics as strict JSON (NaN or inf as null)"
    )
    p.set_defaults(run=run, parser=p)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..data import DataLoader
    from ..data.datasets import TextData
    from ..train import Learner, default_metrics

    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    device = tasks.device_of(args.device)
    model, config, weights = tasks.load_trained(args.path, device, best=args.best)
    dataset = args.dataset or config["dataset"]
    is_gpt = config["model"]["model"] == "gpt"
    if is_gpt != (dataset in ("shakespeare", "text")):  # "text": a run on --text PATH
        parser.error(f"a {config['model']['model']} model cannot be evaluated on {dataset}")
    loader: Any
    if is_gpt:
        cli = argparse.Namespace(**config["cli"])
        data = TextData(tasks.text_of(cli))
        _, loader = tasks.text_loaders(data, cli, device)
        metrics = default_metrics(classification=False, language_model=True)
        prefix = "val"
    else:
        loader = DataLoader(tasks.image_split(dataset, args.split), args.batch_size, device=device)
        metrics = default_metrics()
        prefix = args.split
    learner = Learner(model, None, metrics=metrics, display="none")
    result: dict[str, Any] = learner.evaluate(loader, prefix=prefix)
    result.update({"weights": str(weights), "dataset": dataset, "examples": _count(loader)})
    if args.json:
        print(tasks.dumps(result))  # strict JSON: NaN/inf as null
        return 0
    print(f"{weights} on {dataset} ({prefix}, {result['examples']} examples):")
    for key, value in result.items():
        if isinstance(value, float):
            shown = tasks.fmt_pct(value) if "accuracy" in key else f"{value:.4f}"
            print(f"  {key:24s} {shown}")
    return 0


def _count(loader: Any) -> int:
    ds = getattr(loader, "dataset", None)
    if ds is not None:
        return len(ds)
    return int(loader.batches * loader.batch_size)
