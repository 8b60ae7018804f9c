"""LSTM and GRU language-model training steps (issue 19): ember vs the same model in PyTorch.

The model is PyTorch's word-language-model example at its defaults but a 1000-word vocabulary
(so the recurrence, not the decoder, is what is measured): Embedding(1000, 200) -> LSTM or GRU
(200, 200, 2 layers) -> Linear(200, 1000), sequence 35, batch 20, cross-entropy, one Adam step
(``--models rnn``: the same with a tanh Elman RNN).
Timed on ember's NumPy backend and its torch CPU backend (and CUDA when present) against
PyTorch on the same hardware, in alternating rounds; rows give medians (ms) and
``ratio = ember / torch``. ``--models`` picks the models (default ``lstm,gru``); ``--layer``
times the recurrent layer alone (forward and ``sum().backward()`` of a (35, 20, 200) input).

    taskset -c 1 python bench/rnn.py --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from typing import Any

from _timing import alternating_ms, pin_threads

VOCAB, EMB, HID, LAYERS, STEPS, BATCH = 1000, 200, 200, 2, 35, 20
Step = Callable[[], Any]
_LAYERS = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}  # the recurrent layer of each model


def _batch() -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.integers(0, VOCAB, size=(STEPS, BATCH)), rng.integers(0, VOCAB, size=(STEPS, BATCH))


def ember_step(device: Any, model: str = "lstm") -> Step:
    """One Adam step of the ember LM with recurrent layer ``model`` (lstm | gru | rnn)."""
    import ember as em
    from ember import nn, optim

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(VOCAB, EMB)
            self.rnn = getattr(nn, _LAYERS[model])(EMB, HID, LAYERS)
            self.out = nn.Linear(HID, VOCAB)

        def forward(self, x: em.Tensor) -> em.Tensor:
            y, _ = self.rnn(self.emb(x))
            return self.out(y)

    state = {"model": LM().fork(device.autodiff())}
    opt = optim.Adam()
    x_np, y_np = _batch()
    plain = device.without_autodiff()
    x, y = em.tensor(x_np, device=plain), em.tensor(y_np.reshape(-1), device=plain)

    def step() -> float:
        logits = state["model"](x)
        loss = nn.functional.cross_entropy(logits.reshape((STEPS * BATCH, VOCAB)), y)
        grads = optim.GradientsParams.from_grads(loss.backward(), state["model"])
        state["model"] = opt.step(1e-3, state["model"], grads)
        return float(loss.item())

    return step


def torch_step(where: str, model: str = "lstm") -> Step:
    """The same step with ``torch.nn`` on ``where``."""
    import torch
    from torch import nn

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(VOCAB, EMB)
            self.rnn = getattr(nn, _LAYERS[model])(EMB, HID, LAYERS)
            self.out = nn.Linear(HID, VOCAB)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.rnn(self.emb(x))[0])

    model = LM().to(where)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_np, y_np = _batch()
    x, y = torch.from_numpy(x_np).to(where), torch.from_numpy(y_np).reshape(-1).to(where)

    def step() -> float:
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


def ember_layer(device: Any, model: str = "lstm") -> Step:
    """The recurrent layer alone: forward of a ``(35, 20, 200)`` input and ``sum().backward()``."""
    import numpy as np

    import ember as em
    from ember import nn

    layer = getattr(nn, _LAYERS[model])(EMB, HID, LAYERS).fork(device.autodiff())
    data = np.random.default_rng(0).normal(size=(STEPS, BATCH, EMB)).astype(np.float32)
    x = em.Tensor.from_data(data, device=device.autodiff()).require_grad()

    def step() -> None:
        layer(x)[0].sum().backward()

    return step


def torch_layer(where: str, model: str = "lstm") -> Step:
    """The same with ``torch.nn``."""
    import torch
    from torch import nn

    layer = getattr(nn, _LAYERS[model])(EMB, HID, LAYERS).to(where)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(STEPS, BATCH, EMB, generator=gen).to(where).requires_grad_()

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x)[0].sum().backward()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default="lstm,gru", help="comma-separated: lstm, gru, rnn")
    ap.add_argument("--layer", action="store_true", help="time the recurrent layer alone")
    ap.add_argument(
        "--backends", default="numpy,torch,cuda", help="comma-separated: numpy, torch, cuda"
    )
    args = ap.parse_args()
    pin_threads(args.threads)
    import torch

    import ember as em

    torch.set_num_threads(args.threads)
    print(f"load: {os.getloadavg()}, threads {args.threads}, rounds {args.rounds}")
    chosen = args.backends.split(",")
    targets = [("numpy", em.Device.cpu(), "cpu")] if "numpy" in chosen else []
    if "torch" in chosen:
        targets.append(("torch cpu", em.Device.torch("cpu"), "cpu"))
    if "cuda" in chosen and torch.cuda.is_available():
        targets.append(("cuda", em.Device.torch("cuda:0"), "cuda:0"))
    print(f"{'model, backend':<22}{'ember ms':>10}{'torch ms':>10}{'ratio':>8}")
    for model in args.models.split(","):
        for label, dev, where in targets:
            sync = torch.cuda.synchronize if where.startswith("cuda") else (lambda: None)
            if args.layer:
                ours, ref = ember_layer(dev, model), torch_layer(where, model)
            else:
                ours, ref = ember_step(dev, model), torch_step(where, model)

            def a(step: Step = ours, sync: Callable[[], Any] = sync) -> None:
                step()
                sync()

            def b(step: Step = ref, sync: Callable[[], Any] = sync) -> None:
                step()
                sync()

            ta, tb = alternating_ms(a, b, args.repeats, args.rounds)
            ma, mb = statistics.median(ta), statistics.median(tb)
            print(f"{model + ', ' + label:<22}{ma:>10.2f}{mb:>10.2f}{ma / mb:>8.2f}")


if __name__ == "__main__":
    main()
