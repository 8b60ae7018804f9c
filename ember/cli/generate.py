"""``ember generate``: sample text from a GPT trained with ``ember train --model gpt``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import tasks


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "generate",
        help="sample text from a trained GPT",
        description="Sample text from the character GPT of an `ember train --model gpt` run.",
    )
    p.add_argument("path", type=Path, help="run directory (or one of its records)")
    p.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    p.add_argument("--tokens", type=int, default=500, help="characters to generate")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--device", help="cpu, torch:cpu, cuda or cuda:N")
    p.add_argument("--best", action="store_true", help="use best.safetensors (best validation)")
    p.set_defaults(run=run, parser=p)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..data.datasets import CharTokenizer

    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    if args.tokens < 0 or args.temperature <= 0:
        parser.error("--tokens must be >= 0 and --temperature > 0")
    if args.top_k is not None and args.top_k < 1:
        parser.error("--top-k must be >= 1")
    model, config, _ = tasks.load_trained(args.path, tasks.device_of(args.device), best=args.best)
    if config["model"]["model"] != "gpt":
        parser.error(f"{args.path} holds a {config['model']['model']} model; generate needs gpt")
    tok = CharTokenizer.from_dict(config["tokenizer"])
    prompt = tok.encode(args.prompt or "\n")[None]  # (1, T0)
    ids = model.generate(
        prompt, args.tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed
    )
    print(tok.decode(ids[0]))
    return 0
