"""``ember bench checkpointing``: a GPT training step under ``Disabled`` and ``Balanced``.

For each strategy: median step time and the peak memory of one forward + backward above what the
parameters already hold (traced NumPy allocations on the NumPy backend, the CUDA allocator's peak
on CUDA; not measured for PyTorch CPU tensors). PyTorch without and with
``torch.utils.checkpoint`` around each block is the reference on the same hardware.

The model is a 6-layer, width-128 GPT (context 128, batch 8); ``checkpointing.py`` is the longer
study on a 12-block transformer, with its own command line.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

from train_step import make_batch, median_ms, torch_gpt, torch_where

import ember as em

Strategy = em.GradientCheckpointingStrategy

GPT_ARGS: dict[str, Any] = {
    "vocab_size": 65,
    "block_size": 128,
    "n_layer": 6,
    "n_head": 4,
    "n_embd": 128,
    "dropout": 0.1,
}
BATCH = 8
_VOCAB = GPT_ARGS["vocab_size"]
_SPEC = {"model": {"model": "gpt"}, "input": (BATCH, GPT_ARGS["block_size"]), "classes": _VOCAB}


def _peak_bytes(device: em.Device, fn: Callable[[], Any]) -> int | None:
    if device.backend_name == "numpy":
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            fn()
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    if device.is_cuda:
        import torch

        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - base)
    return None


def _ember_fwd_bwd(device: em.Device, strategy: Strategy) -> Callable[[], Any]:
    from ember.models import GPT, GPTConfig

    dev = device.autodiff()
    if strategy is Strategy.Balanced:
        dev = dev.gradient_checkpointing()
    model = GPT(GPTConfig(**GPT_ARGS), device=dev)
    x_np, y_np = make_batch(_SPEC)
    plain = device.without_autodiff()
    x, y = em.tensor(x_np, device=plain), em.tensor(y_np, device=plain)

    def step() -> Any:
        from ember.nn import functional as F

        logits = model(x)
        loss = F.cross_entropy(logits.reshape((-1, _VOCAB)), y.reshape((-1,)))
        return loss.backward()

    return step


def _torch_fwd_bwd(where: str, checkpoint: bool) -> Callable[[], Any]:
    import torch
    from torch.utils.checkpoint import checkpoint as ckpt

    model = torch_gpt(GPT_ARGS).to(where)
    x_np, y_np = make_batch(_SPEC)
    x, y = torch.from_numpy(x_np).to(where), torch.from_numpy(y_np).to(where)

    def forward() -> torch.Tensor:
        pos = torch.arange(x.shape[1], device=x.device)
        h = model.wte(x) + model.wpe(pos)
        for block in model.blocks:
            h = ckpt(block, h, use_reentrant=False) if checkpoint else block(h)
        return model.head(model.ln_f(h))

    def step() -> None:
        logits = forward()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, _VOCAB), y.reshape(-1))
        model.zero_grad(set_to_none=True)
        loss.backward()

    return step


def run(device: em.Device, repeats: int = 5) -> list[dict[str, Any]]:
    """Rows per strategy: ``ms``, ``peak_mb`` and ratios against ``Disabled`` (and PyTorch)."""
    rows: list[dict[str, Any]] = []
    for strategy in (Strategy.Disabled, Strategy.Balanced):
        step = _ember_fwd_bwd(device, strategy)
        ms = median_ms(step, repeats)
        peak = _peak_bytes(device, step)
        rows.append(
            {
                "bench": "gpt6x128_fwd_bwd",
                "framework": "ember",
                "strategy": strategy.name,
                "device": str(device),
                "ms": ms,
                "peak_mb": None if peak is None else peak / 2**20,
            }
        )
    where = torch_where(device)
    if where is not None:
        import torch

        sync = torch.cuda.synchronize if where.startswith("cuda") else None
        for checkpoint in (False, True):
            step = _torch_fwd_bwd(where, checkpoint)
            ms = median_ms(step, repeats, sync=sync)
            peak = _peak_bytes(device, step) if where.startswith("cuda") else None
            rows.append(
                {
                    "bench": "gpt6x128_fwd_bwd",
                    "framework": "torch",
                    "strategy": "checkpoint per block" if checkpoint else "none",
                    "device": where,
                    "ms": ms,
                    "peak_mb": None if peak is None else peak / 2**20,
                }
            )
    base = rows[0]
    for r in rows:
        r["time_vs_disabled"] = r["ms"] / base["ms"]
        if r["peak_mb"] is not None and base["peak_mb"]:
            r["peak_vs_disabled"] = r["peak_mb"] / base["peak_mb"]
    return rows
