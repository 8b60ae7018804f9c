"""``ember quantize``: write a trained model's int8 weights (``model.int8.safetensors``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import tasks

INT8_WEIGHTS = "model.int8.safetensors"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "quantize",
        help="quantize a trained model's Linear/Embedding weights to int8",
        description=(
            "Quantize the Linear and Embedding weights of an `ember train` run to int8 with "
            f"float32 scales and write them to RUN_DIR/{INT8_WEIGHTS} (other layers stay "
            "float). `ember eval` and `ember generate` take that file as their path."
        ),
    )
    p.add_argument("path", type=Path, help="run directory (or one of its records/weights)")
    p.add_argument(
        "--granularity",
        default="channel",
        help="channel (one scale per output feature / embedding row), tensor, or block:N",
    )
    p.add_argument("--mode", choices=("symmetric", "affine"), default="symmetric")
    p.add_argument("--best", action="store_true", help="quantize best.safetensors")
    p.add_argument("--output", type=Path, help=f"file to write (default: RUN_DIR/{INT8_WEIGHTS})")
    p.set_defaults(run=run, parser=p)


def _granularity(text: str, parser: argparse.ArgumentParser) -> Any:
    if text == "tensor":
        return "tensor"
    if text == "channel":
        return ("channel", 0)
    kind, _, n = text.partition(":")
    if kind == "block" and n.isdigit() and int(n) > 0:
        return ("block", int(n))
    parser.error(f"--granularity: expected channel, tensor or block:N, got {text!r}")
    raise AssertionError  # parser.error exits


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .. import quantization
    from .._core.device import Device
    from .._core.qscheme import QuantScheme

    if not args.path.exists():
        parser.error(f"{args.path} does not exist")
    scheme = QuantScheme(mode=args.mode, granularity=_granularity(args.granularity, parser))
    model, _, weights = tasks.load_trained(args.path, Device.cpu(), best=args.best)
    model.valid()
    before = {n: p.numel() * p.dtype.itemsize for n, p in model.named_parameters()}
    quantization.quantize(model, scheme)
    after: dict[str, int] = {}
    for n, p in model.named_parameters():
        v: Any = p.val()
        if v.is_quantized():
            after[n] = v.nbytes()
    run_dir, _ = tasks.read_config(args.path)
    out = args.output or run_dir / INT8_WEIGHTS
    model.save(out)
    q_float = sum(before[n] for n in after)
    q_int8 = sum(after.values())
    total = sum(before.values())
    print(f"{weights} -> {out} ({scheme.mode}, {args.granularity}):")
    print(
        f"  {len(after)} weights quantized: {q_float} -> {q_int8} bytes "
        f"({q_int8 / max(q_float, 1):.3f}x); whole model {total} -> "
        f"{total - q_float + q_int8} bytes"
    )
    return 0
