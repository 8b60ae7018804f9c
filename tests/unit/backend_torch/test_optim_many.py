"""The torch backend's multi-tensor Adam step equals the per-parameter rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em

pytest.importorskip("torch")
from ember.backend.torch.backend import TorchBackend


class _Net(em.nn.Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.a = em.nn.Linear(5, 4, device=device)
        self.b = em.nn.Linear(4, 3, device=device)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.b(self.a(x).tanh())


def _train(device: em.Device, optim: Any, steps: int) -> dict[str, np.ndarray]:
    model = _Net(device.autodiff())
    state = {n: em.Tensor.from_data(v, device=device) for n, v in _INIT.items()}
    model.load_state_dict(state)
    x = em.Tensor.from_data(_X, device=device)
    for _ in range(steps):
        loss = (model(x) * model(x)).mean()
        grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
        model = optim.step(0.05, model, grads)
    return {n: p.val().to_numpy() for n, p in model.named_parameters()}


_rng = np.random.default_rng(0)
_X = _rng.normal(size=(6, 5)).astype(np.float32)
_INIT = {
    "a.weight": _rng.normal(size=(4, 5)).astype(np.float32),
    "a.bias": _rng.normal(size=(4,)).astype(np.float32),
    "b.weight": _rng.normal(size=(3, 4)).astype(np.float32),
    "b.bias": _rng.normal(size=(3,)).astype(np.float32),
}


@pytest.mark.parametrize(
    "make",
    [lambda: em.optim.Adam(), lambda: em.optim.Adam(weight_decay=0.1), lambda: em.optim.AdamW()],
    ids=["adam", "adam-l2", "adamw"],
)
def test_multi_tensor_adam_matches_the_per_parameter_rule(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = TorchBackend.adam_many

    def counted(self: TorchBackend, *args: Any) -> Any:
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(TorchBackend, "adam_many", counted)
    want = _train(em.Device.cpu(), make(), 4)  # NumPy: the per-parameter loop
    got = _train(em.Device.torch("cpu"), make(), 4)
    assert len(calls) == 4  # one multi-tensor call per step for all four parameters
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)
