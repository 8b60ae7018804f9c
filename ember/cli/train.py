"""``ember train``: train a model (default: a small CNN on the shipped digits) end to end."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import models
from .._core.creation import seed as seed_all
from ..checkpoint.spelling import parse_strategy
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..errors import AutodiffError, EmberError
from ..models.gpt import language_model_step
from ..train.precision import PRECISIONS
from . import devices as placement
from . import tasks
from .schedule import ContinueSchedule, RunSchedule

# Options a resumed run may change; everything else comes from the run's config.json.
_RESUME_OVERRIDES = (
    "epochs",
    "iters",
    "device",
    "display",
    "patience",
    "matmul_precision",
    "allow_nonfinite",
    "devices",
)

# Defaults that depend on the model (nanoGPT's character config for gpt).
_MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "mlp": {"epochs": 20, "batch_size": 32, "lr": 3e-3, "optimizer": "adam", "weight_decay": 0.0},
    "cnn": {"epochs": 20, "batch_size": 32, "lr": 3e-3, "optimizer": "adam", "weight_decay": 0.0},
    "gpt": {
        "epochs": None,
        "batch_size": 64,
        "lr": 1e-3,
        "optimizer": "adamw",
        "weight_decay": 0.1,
    },
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train a model (default: a small CNN on digits)",
        description="Train a model and write its record, metrics and curves to an output "
        "directory. With no options: a small CNN on the 1,797 shipped 8x8 digits.",
    )
    p.add_argument(
        "--dataset", choices=tasks.DATASETS, help="default: digits (shakespeare for gpt)"
    )
    p.add_argument("--model", choices=models.MODELS, help="default: cnn (gpt for shakespeare)")
    p.add_argument(
        "--device",
        help="cpu (NumPy), torch:cpu, cuda or cuda:N (default: EMBER_DEVICE if set, else torch:cpu "
        "when PyTorch is installed, else cpu). With --devices ddp (or under torchrun) only "
        "the kind counts: cuda (NCCL, each rank on cuda:LOCAL_RANK) or torch:cpu (Gloo)",
    )
    p.add_argument(
        "--devices",
        type=placement.devices_arg,
        metavar="{D1,D2,...|ddp}",
        help="data parallel: a comma-separated list (cuda:0,cuda:1; cpu,cpu) trains one replica "
        "per device in this process, each on its part of every batch; ddp makes this process "
        "one rank of a torchrun job (the default when torchrun started it: torchrun "
        "--nproc_per_node=N -m ember train ...), each rank on its own rows of the same batches, "
        "rank 0 writing the run. --batch-size is the global batch either way",
    )
    p.add_argument("--epochs", type=_positive_int, help="epochs (image models)")
    p.add_argument("--batch-size", type=_positive_int)
    p.add_argument(
        "--lr",
        type=_positive_float,
        help="peak learning rate (default 3e-3; 1e-3 for gpt); the rate warms up linearly for "
        "--warmup-iters steps, then decays by a half cosine to --min-lr at the last step",
    )
    p.add_argument(
        "--warmup-iters",
        type=_non_negative_int,
        help="linear warm-up steps, fewer than the run's steps (default 0; 100 for gpt)",
    )
    p.add_argument(
        "--min-lr",
        type=_non_negative_float,
        help="final learning rate, at most --lr (default --lr/50; --lr/10 for gpt)",
    )
    p.add_argument("--optimizer", choices=("sgd", "adam", "adamw"))
    p.add_argument("--weight-decay", type=_non_negative_float)
    p.add_argument(
        "--grad-clip",
        type=_non_negative_float,
        default=None,
        help="clip the gradient norm (0: off; default 1.0 for gpt, off otherwise)",
    )
    p.add_argument("--grad-accumulation", type=_positive_int, default=1)
    p.add_argument(
        "--checkpointing",
        type=_checkpointing,
        default="disabled",
        metavar="{disabled,balanced,budget:F,budget:N[MiB]}",
        help="gradient checkpointing strategy: disabled, balanced, or a memory budget for the "
        "saved values (budget:0.4 = 40%% of the Disabled peak; budget:512MiB in bytes)",
    )
    p.add_argument("--output", type=Path, help="output directory (default: runs/<timestamp>)")
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its newest record, with its own settings; only "
        "--epochs, --iters, --device, --display, --patience, --matmul-precision and "
        "--allow-nonfinite may change; --devices is this launch's own (not taken from the run). "
        "A changed --epochs/--iters continues the learning-rate "
        "curve from the rate reached (a half cosine down to --min-lr at the new last step); "
        "an unchanged one reproduces the uninterrupted run",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="fp32, or mixed precision: matmuls, convolutions and attention in bf16, or in fp16 "
        "with dynamic loss scaling (parameters stay float32; pays off on CUDA)",
    )
    p.add_argument(
        "--capture",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run each training step through em.capture: on CUDA one CUDA-graph replay per "
        "batch (recorded once per batch shape); on CPU the eager step. fp32 or bf16 only. "
        "Default: on for the gpt task on one CUDA device (fp32/bf16), off otherwise",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seeds initialisation, shuffling, dropout and the validation split carved from the "
        "training images",
    )
    p.add_argument(
        "--matmul-precision",
        choices=("highest", "high", "medium"),
        default="high",
        help="float32 matmul precision on PyTorch devices (high: TF32 on CUDA)",
    )
    p.add_argument("--patience", type=_positive_int, help="early stopping patience (epochs)")
    p.add_argument("--keep-records", type=_positive_int, default=3)
    p.add_argument("--display", choices=("auto", "tty", "plain", "none"), default="auto")
    p.add_argument(
        "--allow-nonfinite",
        action="store_true",
        help="train on when a loss or weight becomes NaN or infinite (default: stop with an "
        "error naming the epoch and step, and save nothing diverged)",
    )
    g = p.add_argument_group("gpt options")
    g.add_argument("--iters", type=_positive_int, default=5000, help="optimizer steps")
    g.add_argument("--block-size", type=_positive_int, default=256)
    g.add_argument("--n-layer", type=_positive_int, default=6)
    g.add_argument(
        "--n-head",
        type=_positive_int,
        default=None,
        help="attention heads, a divisor of --n-embd (default: the largest divisor of --n-embd "
        "up to 6: 6 for 384, 4 for 64)",
    )
    g.add_argument("--n-embd", type=_positive_int, default=384)
    g.add_argument("--dropout", type=_probability, default=0.2)
    g.add_argument(
        "--eval-interval",
        type=_positive_int,
        default=250,
        help="steps between validation estimates",
    )
    g.add_argument(
        "--eval-iters", type=_positive_int, default=200, help="batches per validation estimate"
    )
    g.add_argument("--text", type=Path, metavar="PATH", help="train on a local text file")
    p.set_defaults(run=run, parser=p)


def _checkpointing(s: str) -> str:
    """A strategy's spelling (``ember.checkpoint.spelling``), checked and lower-cased."""
    try:
        parse_strategy(s)
    except AutodiffError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return s.strip().lower()


def _positive_int(s: str) -> int:
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s}")
    return v


def _non_negative_int(s: str) -> int:
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {s}")
    return v


def _positive_float(s: str) -> float:
    v = float(s)
    if not v > 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {s}")
    return v


def _non_negative_float(s: str) -> float:
    v = float(s)
    if not v >= 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {s}")
    return v


def _probability(s: str) -> float:
    v = float(s)
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {s}")
    return v


def _resolve(
    args: argparse.Namespace, parser: argparse.ArgumentParser, *, create_output: bool = True
) -> argparse.Namespace:
    """Fill model-dependent defaults and reject incompatible choices (usage errors).

    Without ``create_output`` (a DDP rank other than 0) no run directory is created: a new run
    without ``--output`` keeps ``args.output`` None."""
    if args.resume is not None:
        if args.output is not None:
            parser.error("--resume continues in the run's own directory; drop --output")
        own = {a.dest for a in parser._actions} - {*_RESUME_OVERRIDES, "resume", "output", "help"}
        fixed = [
            "--" + key.replace("_", "-")
            for key, value in vars(args).items()
            if key in own and value != parser.get_default(key)
        ]
        if fixed:
            parser.error(
                f"--resume continues with the run's own settings; {', '.join(fixed)} cannot "
                "change (a resume may change --epochs, --iters, --device, --display, "
                "--patience, --matmul-precision, --allow-nonfinite)"
            )
        run_dir, config = tasks.read_config(args.resume)
        saved = dict(config["cli"])
        for key in _RESUME_OVERRIDES:
            if getattr(args, key) not in (None, parser.get_default(key)):
                saved[key] = getattr(args, key)
        saved["devices"] = args.devices  # how this launch runs, never the saved run's
        if (
            saved.get("model") == "gpt"
            and "iters" in saved
            and args.iters != parser.get_default("iters")
        ):  # more (or fewer) steps: as many epochs of eval_interval steps as they need
            saved["epochs"] = -(-int(saved["iters"]) // int(saved["eval_interval"]))
        saved["resume"] = run_dir
        saved["output"] = run_dir
        return argparse.Namespace(**{**vars(args), **saved, "run": args.run, "parser": parser})
    if args.text is not None and args.dataset not in (None, "shakespeare"):
        parser.error(f"--text is for the text (gpt) task, not --dataset {args.dataset}")
    if args.model is None:
        args.model = "gpt" if args.dataset == "shakespeare" or args.text else "cnn"
    if args.dataset is None:
        args.dataset = "shakespeare" if args.model == "gpt" else "digits"
    if (args.model == "gpt") != (args.dataset == "shakespeare"):
        parser.error(
            f"--model {args.model} does not fit --dataset {args.dataset}: gpt trains on text "
            "(--dataset shakespeare or --text PATH), mlp and cnn on images"
        )
    for key, value in _MODEL_DEFAULTS[args.model].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.grad_clip is None:
        args.grad_clip = 1.0 if args.model == "gpt" else 0.0
    if args.min_lr is None:
        args.min_lr = args.lr / (10 if args.model == "gpt" else 50)
    elif args.min_lr > args.lr:
        parser.error(
            f"--min-lr {args.min_lr:g} is above --lr {args.lr:g}: the learning rate decays from "
            "--lr down to --min-lr; pass a --min-lr of at most --lr"
        )
    if args.model == "gpt":
        if args.n_head is None:
            args.n_head = default_heads(args.n_embd)
        elif args.n_embd % args.n_head:
            fits = [h for h in range(1, min(args.n_embd, 16) + 1) if args.n_embd % h == 0]
            parser.error(
                f"--n-head {args.n_head} does not divide --n-embd {args.n_embd}: each head gets "
                f"n_embd / n_head channels. Pass a divisor (--n-head {' | '.join(map(str, fits))}) "
                "or leave --n-head out to derive it"
            )
        args.eval_interval = min(args.eval_interval, args.iters)
        args.epochs = -(-args.iters // args.eval_interval)
        _fill_warmup(args, parser, args.epochs * args.eval_interval)  # before the text loads
    if args.output is None and create_output:
        stamp = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
        args.output, k = stamp, 2
        while True:  # claim the directory atomically: runs started in one second get -2, -3...
            try:
                args.output.mkdir(parents=True)
                break
            except FileExistsError:
                args.output, k = stamp.with_name(f"{stamp.name}-{k}"), k + 1
    return args


def default_heads(n_embd: int) -> int:
    """The default ``--n-head``: the largest divisor of ``n_embd`` up to 6 (nanoGPT's 6 heads of
    64 channels for 384)."""
    return max(h for h in range(1, 7) if n_embd % h == 0)


def dataset_label(args: argparse.Namespace) -> str:
    """What the run trains on, for the banner and ``config.json``: the ``--dataset`` name, or
    ``text`` for ``--text PATH``."""
    return "text" if getattr(args, "text", None) else str(args.dataset)


def _fill_warmup(args: argparse.Namespace, parser: argparse.ArgumentParser, total: int) -> None:
    """Default ``--warmup-iters`` (gpt: 100, at most the run's steps - 1; else 0), or reject one
    that leaves no step for the decay."""
    if args.warmup_iters is None:
        args.warmup_iters = min(100, total - 1) if args.model == "gpt" else 0
    elif args.warmup_iters >= total:
        parser.error(
            f"--warmup-iters {args.warmup_iters} is not shorter than the run's {total} "
            "optimizer steps; the cosine decay needs at least one step after the warm-up"
        )


def _schedule(
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    steps_per_epoch: int,
    out: Path | None,
    message: Callable[[str], None],
    *,
    writes: bool = True,
) -> tuple[RunSchedule, ContinueSchedule | None]:
    """The run's learning-rate schedule over ``--epochs`` epochs of ``steps_per_epoch`` steps.

    A new run validates and fills ``--warmup-iters``. A resume rebuilds the run's plan from its
    ``config.json`` and returns the callback that, once the record is restored at step s,
    continues the curve from s when the total changed (see ``RunSchedule``), saves the new plan
    to ``config.json`` at once (unless ``writes`` is False: a DDP rank other than 0) and
    announces it.
    """
    total = args.epochs * steps_per_epoch
    if args.resume is None:
        _fill_warmup(args, parser, total)
        return RunSchedule(args.lr, args.warmup_iters, args.min_lr, total), None
    assert out is not None  # a resume names its run directory
    _, config = tasks.read_config(out)
    plan = config.get("lr_schedule")
    if plan is None:  # a run written before the plan was kept: rebuild what it used
        gpt = args.model == "gpt"
        plan = {
            "lr": args.lr,
            "warmup": args.warmup_iters if gpt else 0,
            "min_lr": args.min_lr if gpt else args.lr * 0.02,
            "total_steps": int(config["cli"]["epochs"]) * steps_per_epoch,
        }
    schedule = RunSchedule.from_plan(plan)

    def saved(new_plan: dict[str, Any]) -> None:
        config["lr_schedule"] = new_plan
        if writes:
            tasks.write_config(out, config)
        start, planned = new_plan["changes"][-1]
        message(
            f"the run now plans {planned} optimizer steps: the learning rate continues from "
            f"{schedule.rate(start):.3g} at step {start} and decays to {schedule.min_lr:.3g} at "
            f"step {planned} (saved in config.json, lr_schedule)"
        )

    return schedule, ContinueSchedule(schedule, total, saved)


def default_capture(args: argparse.Namespace) -> bool:
    """``--capture``'s default: on for the gpt task on one CUDA device in fp32 or bf16 (where
    a captured step was verified to learn as eager does, bench/RESULTS.md), off otherwise."""
    if args.model != "gpt" or args.precision == "fp16" or args.devices is not None:
        return False
    if placement.wants_ddp(args.devices):
        return False
    return tasks.device_of(args.device).is_cuda


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.devices not in (None, placement.DDP) and args.device is not None:
        parser.error(
            f"--device {args.device} and --devices {args.devices}: the list names every device; "
            "pass one of them"
        )
    args = _resolve(args, parser, create_output=placement.launch_rank(args.devices) == 0)
    if args.capture is None:
        args.capture = default_capture(args)
    if args.capture and args.precision == "fp16":
        parser.error(
            "--capture records fp32 or bf16 steps; fp16's loss scaler reads the overflow flag on "
            "the host every step. Use --precision bf16, or drop --capture."
        )
    if args.capture and (args.devices is not None or placement.wants_ddp(args.devices)):
        parser.error(
            "--capture records one device's steps; drop --capture to train with --devices (or "
            "under torchrun)"
        )
    out = Path(args.output) if args.output is not None else None
    if (
        args.resume is None
        and out is not None
        and (out / "records").is_dir()
        and any((out / "records").iterdir())
    ):
        parser.error(f"{out} already holds a run; pass --resume {out} or another --output")
    plan = placement.plan_of(args.devices, args.device)
    try:
        return _train(args, parser, out, plan)
    finally:
        plan.close()


def _train(
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    out: Path | None,
    plan: placement.Plan,
) -> int:
    """Train as ``plan`` places the run; a DDP rank other than 0 writes nothing."""
    from ..train import (
        Callback,
        EarlyStopping,
        Learner,
        NonFiniteError,
        default_metrics,
        make_display,
    )

    resuming = args.resume is not None
    writes = plan.writes and out is not None
    seed_all(args.seed)
    device = plan.device
    tasks.set_matmul_precision(device, args.matmul_precision)
    train_device = device.autodiff()
    strategy = parse_strategy(args.checkpointing)
    if strategy != GradientCheckpointingStrategy.Disabled:
        train_device = train_device.gradient_checkpointing(budget=strategy)

    extra: dict[str, Any] = {}
    train: Any
    valid: Any
    if args.model == "gpt":
        from ..data.datasets import TextData

        data = TextData(tasks.text_of(args))
        train, valid = tasks.text_loaders(data, args, device)
        model_cfg = tasks.gpt_model_config(args, data.tokenizer.vocab_size)
        extra["tokenizer"] = data.tokenizer.to_dict()
        metrics = default_metrics(classification=False, language_model=True)
        steps_per_epoch = len(train)
    else:
        train, valid, test = tasks.image_loaders(args.dataset, args.batch_size, args.seed, device)
        model_cfg = tasks.image_model_config(args.model, args.dataset)
        metrics = default_metrics()
        steps_per_epoch = -(-len(train) // args.grad_accumulation)
    display = make_display(args.display if plan.writes else "none")
    schedule, continue_schedule = _schedule(
        args, parser, steps_per_epoch, out, display.message, writes=writes
    )
    model = models.build_model(model_cfg, train_device)
    cli = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(args).items()
        if k not in ("run", "parser", "resume", "output")
    }
    label = dataset_label(args)
    cli["dataset"] = label  # "text" for --text PATH (its path is cli["text"]), never shakespeare
    config = {
        "model": model_cfg,
        "dataset": label,
        "cli": cli,
        **extra,
        "lr_schedule": schedule.plan(),
    }
    if writes and not resuming:
        assert out is not None
        tasks.write_config(out, config)

    callbacks: list[Callback] = []
    if args.patience is not None:
        monitor = "valid_loss"
        callbacks.append(EarlyStopping(monitor, patience=args.patience))
    if continue_schedule is not None:
        callbacks.append(continue_schedule)
    if plan.group is not None:  # last: records of one-process runs keep their callback list
        callbacks.append(placement.RankSeed(args.seed, plan.rank))
    learner = Learner(
        model,
        tasks.make_optimizer(args),
        lr=schedule,
        metrics=metrics,
        output_dir=out if plan.writes else None,
        keep_records=args.keep_records,
        grad_accumulation=args.grad_accumulation,
        callbacks=callbacks,
        display=display,
        allow_nonfinite=args.allow_nonfinite,
        best_metric="valid_loss" if args.model == "gpt" else "valid_accuracy",
        precision=args.precision,
        capture=args.capture,
        # the GPT's loss fuses the LM head with the cross-entropy: no (B, T, vocab) logits
        loss_fn=language_model_step if args.model == "gpt" else None,
        devices=plan.parallel,
    )
    on = f"text {args.text}" if args.text is not None else label
    split = (
        ""
        if args.model == "gpt"
        else f" ({len(train.dataset)} train / {len(valid.dataset)} validation images)"
    )
    learner.display.message(
        f"ember train: {args.model} on {on}{split}, {model.num_params():,} parameters, "
        f"device {plan.label}"
        + (f", {args.precision}" if args.precision != "fp32" else "")
        + f", {args.epochs} epochs of {len(train)} batches"
        + (f", resuming from {out}" if resuming else "")
    )
    t0 = time.perf_counter()
    try:
        history = learner.fit(train, valid, args.epochs, resume=_resume_from(out, plan, resuming))
    except NonFiniteError as e:
        learner.display.message(f"training stopped at epoch {e.epoch} step {e.step}: diverged")
        newest = learner.latest_record()
        kept = f"{newest} holds the last good weights" if newest is not None else "no record exists"
        raise EmberError(
            f"{e.summary}; lower --lr (or clip with --grad-clip), or pass --allow-nonfinite to "
            f"train on. Nothing diverged was saved: {kept}."
        ) from e
    elapsed = time.perf_counter() - t0
    summary: dict[str, Any] = {"epochs": len(history), "steps": learner.steps, "time_s": elapsed}
    if plan.group is not None:  # every rank joins the check; rank 0 reports it
        summary["world_size"] = plan.group.world_size
        summary["ranks_max_param_diff"] = plan.group.max_divergence(learner.model)
    if not writes:
        return 0
    assert out is not None
    if args.model == "gpt":
        last, best = history[-1], learner.best or {}
        summary["val_loss"] = last["valid_loss"]
        summary["train_loss"] = last["train_loss"]
        summary["best_val_loss"] = best.get("value")
        summary["best_step"] = best.get("steps")
        learner.display.message(
            f"val loss {last['valid_loss']:.4f} (perplexity {last['valid_perplexity']:.2f}) "
            f"after {learner.steps} steps in {elapsed:.1f}s; best "
            f"{best.get('value', math.nan):.4f} at step {int(best.get('steps', 0))} "
            "(best.safetensors)"
        )
    else:  # the best epoch on the validation split, measured once on the test split
        best = learner.best or {}
        if (out / "best.safetensors").is_file():
            learner.model.load(out / "best.safetensors")
        final = learner.evaluate(test, prefix="test")
        summary.update(final)
        summary["best_epoch"] = best.get("epoch")
        summary["best_valid_accuracy"] = best.get("value")
        learner.display.message(
            f"test accuracy {tasks.fmt_pct(final['test_accuracy'])} "
            f"(loss {final['test_loss']:.4f}) of epoch {int(best.get('epoch', len(history)))}, "
            f"the best on the validation split "
            f"({tasks.fmt_pct(best.get('value', math.nan))}), after {len(history)} epochs in "
            f"{elapsed:.1f}s"
        )
    tasks.write_json(out / "summary.json", summary)  # NaN/inf as null: strict JSON
    learner.display.message(f"wrote {out}/ (model.safetensors, metrics.csv, records/)")
    return 0


def _resume_from(out: Path | None, plan: placement.Plan, resuming: bool) -> bool | Path:
    """``fit``'s ``resume``: True (the newest record that loads) for one process; for DDP
    ranks the newest complete record, named explicitly, so that every rank loads the same one
    (a damaged record then stops every rank alike)."""
    if not resuming or plan.group is None:
        return resuming
    from ..record.run import record_dirs

    assert out is not None
    found = record_dirs(out / "records")
    if not found:
        raise EmberError(
            f"ember train: --resume {out} holds no records; train without --resume first."
        )
    return found[0]
