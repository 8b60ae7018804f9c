"""The torch backend's multi-tensor Adam step equals the per-parameter rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers.tolerance import tolerance

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


@pytest.mark.parametrize("decoupled", [False, True], ids=["adam", "adamw"])
def test_fused_adam_leaves_its_inputs_unchanged_and_matches_the_foreach_path(
    decoupled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from ember.backend.torch import backend as tb

    b = em.Device.torch("cpu").b
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(4, 5, generator=g), torch.randn(3, generator=g)]
    grads = [torch.randn(4, 5, generator=g).t().contiguous().t(), torch.randn(3, generator=g)]
    ms = [torch.randn(p.shape, generator=g) for p in params]
    vs = [torch.rand(p.shape, generator=g) for p in params]
    before = [t.clone() for t in params + grads + ms + vs]
    args = (7, 0.01, 0.9, 0.99, 1e-8, 0.1, decoupled)
    assert tb._fusable(params, grads)
    fused = b.adam_many(params, grads, ms, vs, *args)
    for t, old in zip(params + grads + ms + vs, before):
        assert torch.equal(t, old)  # values: nothing was updated in place
    monkeypatch.setattr(tb, "_fusable", lambda p, g: False)
    plain = b.adam_many(params, grads, ms, vs, *args)
    # one elementwise Adam update along two paths: about a dozen roundings per element
    tol = tolerance(torch.float32, 12)
    for got, want in zip(fused, plain):
        for a, c in zip(got, want):
            torch.testing.assert_close(a, c, **tol)


def test_mixed_dtypes_take_the_foreach_path() -> None:
    import torch

    from ember.backend.torch.backend import _fusable

    p32, p64 = torch.zeros(2), torch.zeros(2, dtype=torch.float64)
    assert not _fusable([p32, p64], [p32, p64])
    assert not _fusable([p32], [p64])
    assert _fusable([p64, p64], [p64, p64])
