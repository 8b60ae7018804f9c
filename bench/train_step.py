"""Training-step workloads of ``ember bench mlp|cnn|gpt``: ember vs the same model in PyTorch.

Each workload times one optimizer step (forward, backward, Adam update) of an ``ember.models``
network and of the same architecture written with ``torch.nn``, in one process on matching
hardware (ember's ``cpu`` device is compared with PyTorch on CPU, ``cuda:i`` with ``cuda:i``).
Rows report medians in milliseconds and ``ratio = ember / torch``.

- ``mlp``: ``ember.models.MLP`` 784-256-256-10, batch 128 (also against hand-written NumPy on
  the NumPy backend);
- ``cnn``: ``ember.models.CNN`` on 28x28 images, batch 64;
- ``gpt``: a small character GPT (2 layers, width 128, context 64), batch 16.

``median_ms`` and the PyTorch GPT are shared with ``checkpointing_gpt.py`` and ``host_gpt.py``.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ember as em

Step = Callable[[], Any]


def median_ms(
    step: Step, repeats: int, warmup: int = 2, sync: Callable[[], None] | None = None
) -> float:
    """Median wall time of ``step`` in milliseconds over ``repeats`` calls after ``warmup``."""
    for _ in range(warmup):
        step()
    if sync:
        sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


# ------------------------------------------------------------------------------------ workloads
WORKLOADS: dict[str, dict[str, Any]] = {
    "mlp": {
        "model": {"model": "mlp", "args": {"in_features": 784, "hidden": 256}},
        "input": (128, 1, 28, 28),
        "classes": 10,
    },
    "cnn": {
        "model": {"model": "cnn", "args": {"image_size": 28, "channels": 32, "hidden": 128}},
        "input": (64, 1, 28, 28),
        "classes": 10,
    },
    "gpt": {
        "model": {
            "model": "gpt",
            "args": {
                "vocab_size": 65,
                "block_size": 64,
                "n_layer": 2,
                "n_head": 4,
                "n_embd": 128,
                "dropout": 0.0,
            },
        },
        "input": (16, 64),
        "classes": 65,
    },
}


def make_batch(spec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    shape = spec["input"]
    if spec["model"]["model"] == "gpt":
        x = rng.integers(0, spec["classes"], size=shape)
        return x, rng.integers(0, spec["classes"], size=shape)
    return rng.random(shape, dtype=np.float32), rng.integers(0, spec["classes"], size=shape[0])


def ember_step(name: str, device: em.Device) -> Step:
    """One Adam step of the ember model of workload ``name`` on ``device``."""
    from ember import optim
    from ember.models import build_model
    from ember.train.learner import classification_step

    spec = WORKLOADS[name]
    model = build_model(spec["model"], device.autodiff())
    opt = optim.Adam()
    x_np, y_np = make_batch(spec)
    plain = device.without_autodiff()
    batch = (em.tensor(x_np, device=plain), em.tensor(y_np, device=plain))
    state = {"model": model}

    def step() -> float:
        loss, _, _ = classification_step(state["model"], batch)
        grads = optim.GradientsParams.from_grads(loss.backward(), state["model"])
        state["model"] = opt.step(1e-3, state["model"], grads)
        return float(loss.item())

    return step


def torch_step(name: str, where: str) -> Step:
    """The same step written with ``torch.nn`` on torch device ``where``."""
    import torch
    from torch import nn

    spec = WORKLOADS[name]
    a = spec["model"]["args"]
    if name == "mlp":
        model: nn.Module = nn.Sequential(
            nn.Flatten(),
            nn.Linear(a["in_features"], a["hidden"]),
            nn.ReLU(),
            nn.Linear(a["hidden"], a["hidden"]),
            nn.ReLU(),
            nn.Linear(a["hidden"], 10),
        )
    elif name == "cnn":
        c, side = a["channels"], a["image_size"] // 4
        model = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * c * side * side, a["hidden"]),
            nn.ReLU(),
            nn.Linear(a["hidden"], 10),
        )
    else:
        model = torch_gpt(a)
    model = model.to(where)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_np, y_np = make_batch(spec)
    x, y = torch.from_numpy(x_np).to(where), torch.from_numpy(y_np).to(where)

    def step() -> float:
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


def torch_gpt(a: dict[str, Any]) -> Any:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            c = a["n_embd"]
            self.ln1, self.ln2 = nn.LayerNorm(c, bias=False), nn.LayerNorm(c, bias=False)
            self.qkv, self.proj = nn.Linear(c, 3 * c, bias=False), nn.Linear(c, c, bias=False)
            self.fc, self.out = nn.Linear(c, 4 * c, bias=False), nn.Linear(4 * c, c, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            B, T, C = x.shape
            H = a["n_head"]
            q, k, v = self.qkv(self.ln1(x)).split(C, 2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(a["vocab_size"], a["n_embd"])
            self.wpe = nn.Embedding(a["block_size"], a["n_embd"])
            self.blocks = nn.Sequential(*[Block() for _ in range(a["n_layer"])])
            self.ln_f = nn.LayerNorm(a["n_embd"], bias=False)
            self.head = nn.Linear(a["n_embd"], a["vocab_size"], bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            return self.head(self.ln_f(self.blocks(self.wte(idx) + self.wpe(pos))))

    return GPT()


def torch_where(device: em.Device) -> str | None:
    if importlib.util.find_spec("torch") is None:
        return None
    return device.where if device.backend_name == "torch" else "cpu"


def numpy_mlp_step() -> Step:
    """The ``mlp`` workload's Adam step written by hand in NumPy (float32), the floor for the
    NumPy backend."""
    spec = WORKLOADS["mlp"]
    x_np, y_np = make_batch(spec)
    x = x_np.reshape(x_np.shape[0], -1)
    n, hidden = x.shape[0], spec["model"]["args"]["hidden"]
    rng = np.random.default_rng(0)
    sizes = [(x.shape[1], hidden), (hidden, hidden), (hidden, 10)]
    params: list[np.ndarray] = []
    for fan_in, fan_out in sizes:
        bound = np.float32(1.0 / np.sqrt(fan_in))
        params += [
            rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32),
            np.zeros(fan_out, np.float32),
        ]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t = [0]
    onehot = np.eye(10, dtype=np.float32)[y_np]

    def step() -> float:
        w1, b1, w2, b2, w3, b3 = params
        h1 = np.maximum(x @ w1 + b1, 0)
        h2 = np.maximum(h1 @ w2 + b2, 0)
        z = h2 @ w3 + b3
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(n), y_np]).mean())
        gz = (p - onehot) / np.float32(n)
        g_h2 = (gz @ w3.T) * (h2 > 0)
        g_h1 = (g_h2 @ w2.T) * (h1 > 0)
        grads = [x.T @ g_h1, g_h1.sum(0), h1.T @ g_h2, g_h2.sum(0), h2.T @ gz, gz.sum(0)]
        t[0] += 1
        c1, c2 = 1 - 0.9 ** t[0], 1 - 0.999 ** t[0]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            params[i] -= np.float32(1e-3 / c1) * m[i] / (np.sqrt(v[i] / c2) + np.float32(1e-8))
        return loss

    return step


def run(
    workload: str, device: em.Device, repeats: int = 10, rounds: int = 5
) -> list[dict[str, Any]]:
    """Rows for ``workload`` (a key of ``WORKLOADS``): ember on ``device`` against PyTorch on the
    same hardware, and against hand-written NumPy where one exists (``mlp`` on the NumPy
    backend); ``ratio = ember / reference``, the median of each round's ratio. The arms
    alternate over ``rounds`` rounds of ``repeats`` steps each, so the host's drift meets them
    all; ``*_ms`` are medians over the rounds' medians."""
    arms: dict[str | None, tuple[Step, Callable[[], None] | None]] = {
        None: (ember_step(workload, device), None)
    }
    where = torch_where(device)
    if where is not None:
        import torch

        sync = torch.cuda.synchronize if where.startswith("cuda") else None
        arms[f"torch eager ({where})"] = (torch_step(workload, where), sync)
    if workload == "mlp" and device.backend_name == "numpy":
        arms["hand-written numpy"] = (numpy_mlp_step(), None)
    times: dict[str | None, list[float]] = {k: [] for k in arms}
    for r in range(max(1, rounds)):
        for k, (step, sync) in arms.items():
            times[k].append(median_ms(step, repeats, warmup=2 if r == 0 else 1, sync=sync))
    t_em = statistics.median(times[None])

    def row(reference: str | None) -> dict[str, Any]:
        t_ref = None if reference is None else statistics.median(times[reference])
        ratio = None
        if reference is not None:
            ratio = statistics.median(e / t for e, t in zip(times[None], times[reference]))
        return {
            "bench": f"{workload}_train_step",
            "device": str(device),
            "ember_ms": t_em,
            "reference": reference,
            "ref_ms": t_ref,
            "ratio": ratio,
        }

    return [row(k) for k in arms if k is not None] or [row(None)]
