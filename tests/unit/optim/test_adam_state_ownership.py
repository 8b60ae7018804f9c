"""Adam's fused path writes moments in place only while the optimizer alone holds them.

Tensors are values (API.md): a moment handed out by ``state_of`` / ``state_dict`` or given in by
``load_state_dict`` never changes afterwards; moments nobody else holds are updated in their own
buffers (no copy per step).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember as em  # noqa: E402


def _setup(seed: int = 0) -> tuple[em.nn.Module, em.Tensor]:
    em.seed(seed)
    dev = em.Device.torch("cpu").autodiff()
    model = em.nn.Sequential(em.nn.Linear(4, 8, device=dev), em.nn.Linear(8, 2, device=dev))
    x = em.tensor(np.random.default_rng(seed).normal(size=(5, 4)).astype(np.float32), device=dev)
    return model, x


def _step(model: em.nn.Module, optim: em.optim.Optimizer, x: em.Tensor) -> em.nn.Module:
    grads = em.optim.GradientsParams.from_grads((model(x) ** 2).sum().backward(), model)
    return optim.step(1e-2, model, grads)


def _ptrs(optim: em.optim.Optimizer, model: em.nn.Module) -> list[int]:
    return [
        optim._state[p.id][k]._data.data_ptr()  # type: ignore[union-attr]
        for p in model.parameters()
        for k in ("exp_avg", "exp_avg_sq")
    ]


def test_owned_moments_are_updated_in_their_buffers() -> None:
    model, x = _setup()
    optim = em.optim.AdamW(weight_decay=0.01)
    model = _step(model, optim, x)
    before = _ptrs(optim, model)
    model = _step(model, optim, x)
    assert _ptrs(optim, model) == before  # no copies of the moments


def test_handed_out_state_never_changes_and_results_match() -> None:
    model, x = _setup()
    ref_model, _ = _setup()
    optim, ref = em.optim.AdamW(weight_decay=0.01), em.optim.AdamW(weight_decay=0.01)
    for _ in range(2):
        model = _step(model, optim, x)
        ref_model = _step(ref_model, ref, x)
    pid = next(iter(model.parameters())).id
    held = optim.state_of(pid)
    assert held is not None
    snapshot = {k: v.to_numpy().copy() for k, v in held.items() if isinstance(v, em.Tensor)}
    saved = optim.state_dict(model)
    saved_np = {k: v.to_numpy().copy() for k, v in saved.items()}
    for _ in range(3):
        model = _step(model, optim, x)
        ref_model = _step(ref_model, ref, x)
    for k, v in snapshot.items():
        np.testing.assert_array_equal(held[k].to_numpy(), v)  # type: ignore[union-attr]
    for k, v in saved_np.items():
        np.testing.assert_array_equal(saved[k].to_numpy(), v)
    # in-place and copying updates give the same bits
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_array_equal(p.val().to_numpy(), q.val().to_numpy())


def test_loaded_state_tensors_are_not_written() -> None:
    model, x = _setup()
    optim = em.optim.AdamW()
    model = _step(model, optim, x)
    state = optim.state_dict(model)
    given = {k: v.to_numpy().copy() for k, v in state.items()}
    fresh = em.optim.AdamW()
    fresh.load_state_dict(state, model)
    for _ in range(2):
        model = _step(model, fresh, x)
    for k, v in given.items():
        np.testing.assert_array_equal(state[k].to_numpy(), v)
