"""What ``train``, ``eval`` and ``generate`` share: datasets, models, devices and run configs."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import optim
from .._core.device import Device, default_device, parse_device
from ..data import DataLoader
from ..data.dataset import ArrayDataset, Subset
from ..data.datasets import RandomBlocks, TextData, digits, fashion_mnist, load_text, mnist
from ..models import build_model

IMAGE_DATASETS = {"digits": 8, "mnist": 28, "fashion-mnist": 28}
DATASETS = (*IMAGE_DATASETS, "shakespeare")
CONFIG = "config.json"


def device_of(spec: str | None, *, prefer_torch: bool = True) -> Device:
    """``--device`` (cpu, torch:cpu, cuda, cuda:1); else ``EMBER_DEVICE`` when set; else PyTorch's
    CPU kernels (``torch:cpu``) when torch is installed and ``prefer_torch``, else the NumPy
    backend (``cpu``)."""
    if spec:
        return parse_device(spec)
    if (
        not prefer_torch
        or os.environ.get("EMBER_DEVICE")
        or importlib.util.find_spec("torch") is None
    ):
        return default_device()
    return parse_device("torch:cpu")


def set_matmul_precision(device: Device, precision: str) -> None:
    """On PyTorch devices, ``torch.set_float32_matmul_precision``: "high" allows TF32 matmuls on
    CUDA (as the PyTorch reference training scripts do); NumPy devices are unaffected."""
    if device.backend_name == "torch":
        import torch

        torch.set_float32_matmul_precision(precision)


def image_split(dataset: str, split: str) -> ArrayDataset:
    """The train or test split of an image dataset."""
    if dataset == "digits":
        return digits(split)
    if dataset == "mnist":
        return mnist(split)
    return fashion_mnist(split)


def image_model_config(model: str, dataset: str) -> dict[str, Any]:
    side = IMAGE_DATASETS[dataset]
    if model == "mlp":
        hidden = 128 if dataset == "digits" else 256
        return {"model": "mlp", "args": {"in_features": side * side, "hidden": hidden}}
    if dataset == "digits":
        return {"model": "cnn", "args": {"image_size": side, "channels": 16, "hidden": 64}}
    return {"model": "cnn", "args": {"image_size": side, "channels": 32, "hidden": 128}}


def gpt_model_config(args: Any, vocab_size: int) -> dict[str, Any]:
    return {
        "model": "gpt",
        "args": {
            "vocab_size": vocab_size,
            "block_size": args.block_size,
            "n_layer": args.n_layer,
            "n_head": args.n_head,
            "n_embd": args.n_embd,
            "dropout": args.dropout,
        },
    }


def text_of(args: Any) -> str:
    """``--text PATH`` when given, else tiny Shakespeare (downloaded and cached)."""
    from ..data.datasets import shakespeare

    return load_text(args.text) if getattr(args, "text", None) else shakespeare()


VALID_FRACTION = 0.1


def validation_split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation indices of an ``n``-item training split: a seeded permutation's
    last ``VALID_FRACTION`` (at least one item) validates, the rest trains (both sorted)."""
    perm = np.random.default_rng([seed, 0x5EED]).permutation(n)
    k = max(1, round(n * VALID_FRACTION))
    return np.sort(perm[:-k]), np.sort(perm[-k:])


def image_loaders(
    dataset: str, batch_size: int, seed: int, device: Device
) -> tuple[DataLoader, DataLoader, DataLoader]:
    """Loaders of the training split's two parts and of the test split.

    The validation part (``VALID_FRACTION`` of the training split, carved by ``seed``) picks the
    best epoch and drives early stopping; the test split is read once, at the end.
    """
    full = image_split(dataset, "train")
    fit_idx, valid_idx = validation_split(len(full), seed)
    train = DataLoader(Subset(full, fit_idx), batch_size, shuffle=True, seed=seed, device=device)
    valid = DataLoader(Subset(full, valid_idx), 500, device=device)
    test = DataLoader(image_split(dataset, "test"), 500, device=device)
    return train, valid, test


def text_loaders(data: TextData, args: Any, device: Device) -> tuple[RandomBlocks, RandomBlocks]:
    """Random-window batches: ``eval_interval`` train batches per epoch, ``eval_iters`` val ones."""
    train = RandomBlocks(
        data.train,
        block_size=args.block_size,
        batch_size=args.batch_size,
        batches=min(args.eval_interval, args.iters),
        seed=args.seed,
        device=device,
    )
    valid = RandomBlocks(
        data.val,
        block_size=args.block_size,
        batch_size=args.batch_size,
        batches=args.eval_iters,
        seed=args.seed + 1,
        device=device,
    )
    return train, valid


def make_optimizer(args: Any) -> optim.Optimizer:
    clip = optim.GradientClipping.norm(args.grad_clip) if args.grad_clip > 0 else None
    wd = args.weight_decay
    if args.optimizer == "sgd":
        return optim.SGD(momentum=0.9, weight_decay=wd, grad_clipping=clip)
    betas = (0.9, 0.99) if args.model == "gpt" else (0.9, 0.999)
    if args.optimizer == "adam":
        return optim.Adam(betas=betas, weight_decay=wd, grad_clipping=clip)
    return optim.AdamW(betas=betas, weight_decay=wd, grad_clipping=clip)


def make_schedule(lr: float, total_steps: int, warmup: int, min_lr: float) -> optim.lr.LrScheduler:
    """Linear warm-up for ``warmup`` steps, then a cosine decay to ``min_lr``."""
    total_steps = max(total_steps, 1)
    warmup = min(warmup, total_steps - 1)
    decay = optim.lr.CosineAnnealing(lr, min_lr, max(total_steps - warmup, 1))
    if warmup <= 0:
        return decay
    return optim.lr.Composed(
        [(optim.lr.Linear(lr / warmup, lr, warmup), warmup), (decay, max(total_steps - warmup, 1))]
    )


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (in dicts, lists, tuples), so
    ``json.dumps`` writes strict JSON (``NaN``/``Infinity`` are not JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(value: Any, **kw: Any) -> str:
    """Strict JSON text of ``value``; non-finite floats become ``null``."""
    return json.dumps(json_safe(value), allow_nan=False, **kw)


def write_json(path: Path, value: Any) -> None:
    """Write ``dumps(value)`` to ``path`` atomically (a crash leaves the old file or the new)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(value, indent=1))
    os.replace(tmp, path)


def write_config(run_dir: Path, config: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / CONFIG, config)


def read_config(path: Path) -> tuple[Path, dict[str, Any]]:
    """The run directory holding ``path`` (a run dir, a record dir or a file in them) and its
    config."""
    for d in (path, *path.parents)[:4]:
        if (d / CONFIG).is_file():
            return d, json.loads((d / CONFIG).read_text())
    raise FileNotFoundError(
        f"no {CONFIG} found at or above {str(path)!r}; pass the directory `ember train` wrote "
        "(e.g. runs/20260101-120000)."
    )


def load_trained(
    path: Path, device: Device, *, best: bool = False
) -> tuple[Any, dict[str, Any], Path]:
    """Rebuild the model of a run and load its weights: ``path`` is the run directory (its
    ``model.safetensors`` or, with ``best``, ``best.safetensors``; else its newest record), a
    record directory or a weights file."""
    from ..record import load_training

    run_dir, config = read_config(path)
    model = build_model(config["model"], device)
    if path.is_file():
        weights = path
    elif best:
        weights = run_dir / "best.safetensors"
        if not weights.is_file():
            raise FileNotFoundError(f"{run_dir} holds no best.safetensors (train it longer).")
    elif (path / "training.safetensors").is_file():
        weights = path / "training.safetensors"
    elif (run_dir / "model.safetensors").is_file():
        weights = run_dir / "model.safetensors"
    else:
        from ..record.run import record_dirs  # complete records only, never a partial .tmp

        records = record_dirs(run_dir / "records")
        if not records:
            raise FileNotFoundError(f"{run_dir} holds no model.safetensors and no records yet.")
        weights = records[0] / "training.safetensors"
    if weights.name == "training.safetensors":
        load_training(weights, model)
    else:
        model.load(weights)
    return model, config, weights


def fmt_pct(v: float) -> str:
    return "-" if math.isnan(v) else f"{100 * v:.2f}%"
