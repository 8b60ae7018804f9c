"""int8 quantization: weight bytes and accuracy of quantized models, int8 product throughput.

    python bench/quantization.py models [--run RUN_DIR ...] [--text PATH] [--device cpu|cuda]
    python bench/quantization.py matmul [--device cuda] [--size 4096] [--repeats 20]

``models`` (issue 16, "Performance and accuracy"): for each run directory given (default: a
digits CNN and a small character GPT trained here, in a temporary directory), the bytes of the
Linear/Embedding weights quantized per channel (int8 values + float32 scales) against their
float32 bytes (target <= 0.26x), and the validation loss / accuracy of the int8 model against
the float one (targets: within 0.01 nats, 0.5 points), both from ``ember eval --json``.

``matmul``: medians over rounds (``_timing.alternating_ms``) of
- the (N x N) @ (N x N) product of two quantized tensors (symmetric, per row / per column:
  ``int8_matmul``, torch._int_mm on torch, plus the float32 scaling) against bf16 ``@``
  (target >= 1.3x on one H200 for N = 4096), and the raw ``int8_matmul`` kernel alone;
- a batch-1 linear N -> N: ``F.linear(x, int8 weight)`` (weight-only: the int8 values in x's
  dtype inside the product) against ``F.linear(x, bf16 weight)``.
On CUDA each timed sample is ``--inner`` back-to-back calls ended by one
``torch.cuda.synchronize()`` (throughput: launches overlap the GPU's work, as in a model), the
figure per call. CPU runs default to N = 512
(a working check, not a figure).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _timing import alternating_ms

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- models
def _cli(argv: list[str]) -> str:
    from ember.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    if code != 0:
        raise SystemExit(f"ember {' '.join(argv)} failed ({code})")
    return out.getvalue()


def _train_defaults(root: Path, device: str, text: str | None) -> list[Path]:
    """A digits CNN and a character GPT (n_embd 128) trained briefly, in ``root``."""
    cnn, gpt = root / "cnn", root / "gpt"
    _cli(["train", "--epochs", "3", "--display", "none", "--device", device, "--output", str(cnn)])
    data = ["--text", text] if text else ["--dataset", "shakespeare"]
    _cli(
        ["train", "--model", "gpt", *data, "--iters", "300", "--eval-interval", "100"]
        + ["--eval-iters", "10", "--block-size", "64", "--n-layer", "2", "--n-embd", "128"]
        + ["--batch-size", "16", "--display", "none", "--device", device, "--output", str(gpt)]
    )
    return [cnn, gpt]


def _weight_bytes(run: Path) -> tuple[int, int]:
    """(float32 bytes, int8 bytes with scales) of the quantized weights of RUN/model.int8."""
    import ember as em
    from ember.cli import tasks

    model, _, _ = tasks.load_trained(run / "model.int8.safetensors", em.Device.cpu())
    f32 = q8 = 0
    for _, p in model.named_parameters():
        v: Any = p.val()
        if v.is_quantized():
            f32 += 4 * v.numel()
            q8 += v.nbytes()
    return f32, q8


def models(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [Path(r) for r in args.run] or _train_defaults(Path(tmp), args.device, args.text)
        for run in runs:
            _cli(["quantize", str(run)])
            f32, q8 = _weight_bytes(run)
            flt = json.loads(_cli(["eval", str(run), "--json", "--device", args.device]))
            int8 = run / "model.int8.safetensors"
            qnt = json.loads(_cli(["eval", str(int8), "--json", "--device", args.device]))
            row: dict[str, Any] = {"run": run.name, "weight_bytes_ratio": round(q8 / f32, 4)}
            for key in sorted(flt):
                if isinstance(flt[key], float) and ("loss" in key or "accuracy" in key):
                    row[key] = [round(flt[key], 5), round(qnt[key], 5)]
                    row[key + "_delta"] = round(qnt[key] - flt[key], 5)
            print(json.dumps(row))


# ---------------------------------------------------------------- matmul
def _sync(device: Any) -> Any:
    if device.backend_name == "torch" and "cuda" in str(device):
        import torch

        return torch.cuda.synchronize
    return lambda: None


def matmul(args: argparse.Namespace) -> None:
    import numpy as np

    import ember as em
    from ember.cli import tasks

    dev = tasks.device_of(args.device)
    cuda = "cuda" in str(dev)
    n = args.size or (4096 if cuda else 512)
    sync = _sync(dev)
    rng = np.random.default_rng(0)
    a = em.tensor(rng.normal(size=(n, n)).astype(np.float32), device=dev)
    b = em.tensor(rng.normal(size=(n, n)).astype(np.float32), device=dev)
    qa = a.quantize(em.QuantScheme(granularity=("channel", 0)))  # per row of the left
    # the right operand as a quantized weight is used (x @ W.T): the transpose of a row-major
    # (N, K) int8 weight, per output channel, so the kernel reads it column-major with no copy
    bt = em.tensor(b.T.to_numpy().copy(), device=dev)  # (N, K), row-major
    qb = bt.quantize(em.QuantScheme(granularity=("channel", 0))).T
    a16, b16 = a.cast(em.bfloat16), b.cast(em.bfloat16)
    bk = dev.b
    va, vb = qa._values._raw, qb._values._raw

    inner = args.inner if cuda else 1

    def timed(fn: Any) -> Any:
        def run() -> None:
            for _ in range(inner):
                fn()
            sync()

        return run

    rows = []
    t_q, t_bf = alternating_ms(timed(lambda: qa @ qb), timed(lambda: a16 @ b16), args.repeats)
    t_k, t_bf2 = alternating_ms(
        timed(lambda: bk.int8_matmul(va, vb)), timed(lambda: a16 @ b16), args.repeats
    )
    flops = 2 * n**3
    for name, tq, tb in (
        ("quantized @ (kernel + scales)", t_q, t_bf),
        ("int8_matmul kernel", t_k, t_bf2),
    ):
        mq, mb = statistics.median(tq) / inner, statistics.median(tb) / inner
        rows.append({
            "case": f"({n}x{n}) @ ({n}x{n}) {name}", "int8_ms": round(mq, 4),
            "bf16_ms": round(mb, 4), "int8_TOPS": round(flops / mq / 1e9, 2),
            "bf16_TFLOPS": round(flops / mb / 1e9, 2), "speedup_vs_bf16": round(mb / mq, 3),
        })  # fmt: skip
    F = em.nn.functional
    w = em.tensor(rng.normal(size=(n, n)).astype(np.float32), device=dev)
    qw = w.quantize(em.QuantScheme(granularity=("channel", 0)))
    w16 = w.cast(em.bfloat16)
    x16 = em.tensor(rng.normal(size=(1, n)).astype(np.float32), device=dev).cast(em.bfloat16)
    t_q, t_bf = alternating_ms(
        timed(lambda: F.linear(x16, qw)), timed(lambda: F.linear(x16, w16)), args.repeats
    )
    mq, mb = statistics.median(t_q) / inner, statistics.median(t_bf) / inner
    rows.append({
        "case": f"batch-1 linear {n}->{n} (int8 weight-only)", "int8_ms": round(mq, 4),
        "bf16_ms": round(mb, 4), "speedup_vs_bf16": round(mb / mq, 3),
        "weight_bytes": [qw.nbytes(), 2 * n * n],
    })  # fmt: skip
    out = (qa @ qb).to_numpy().astype(np.float64)
    ref = qa.dequantize().to_numpy().astype(np.float64) @ qb.dequantize().to_numpy()
    rows.append(
        {"check": "max |int8 path - dequantized float64|", "value": float(np.abs(out - ref).max())}
    )
    for r in rows:
        print(json.dumps({"device": str(dev), **r}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("models")
    m.add_argument("--run", action="append", default=[], help="an `ember train` run directory")
    m.add_argument("--device", default="cpu")
    m.add_argument("--text", help="text file for the GPT (default: --dataset shakespeare)")
    k = sub.add_parser("matmul")
    k.add_argument("--device", default="cpu")
    k.add_argument("--size", type=int, default=0)
    k.add_argument("--repeats", type=int, default=5)
    k.add_argument("--inner", type=int, default=20, help="calls per timed sample on CUDA")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    (models if args.what == "models" else matmul)(args)


if __name__ == "__main__":
    main()
