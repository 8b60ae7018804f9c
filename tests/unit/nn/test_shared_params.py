"""A ``Param`` reachable from two modules (tied weights) is one parameter everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember import nn
from ember.models.gpt import GPT, GPTConfig
from ember.optim import AdamW, GradientsParams
from ember.record import load_training, save_training

V, D = 7, 5
AD = em.Device.cpu().autodiff()


class _Tied(nn.Module):
    """Embedding -> tanh -> LM head whose weight is the embedding's (tied)."""

    def __init__(self, device: em.Device | None = None, dtype: em.DType = em.float32) -> None:
        super().__init__()
        self.wte = nn.Embedding(V, D, device=device, dtype=dtype)
        self.mid = nn.Linear(D, D, device=device, dtype=dtype)
        self.lm_head = nn.Linear(D, V, bias=False, device=device, dtype=dtype)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: em.Tensor) -> em.Tensor:
        return self.lm_head(F.tanh(self.mid(self.wte(idx))))


def test_a_tied_weight_is_counted_listed_and_stored_once() -> None:
    m = _Tied(AD)
    assert [n for n, _ in m.named_parameters()] == ["wte.weight", "mid.weight", "mid.bias"]
    assert len(list(m.parameters())) == 3
    assert m.num_params() == V * D + D * D + D
    every = [n for n, _ in m.named_parameters(remove_duplicate=False)]
    assert every == ["wte.weight", "mid.weight", "mid.bias", "lm_head.weight"]
    assert sorted(m.state_dict()) == ["mid.bias", "mid.weight", "wte.weight"]


def test_fork_to_device_train_valid_keep_the_tie() -> None:
    m = _Tied(AD)
    for copy in (m.fork(AD), m.to_device(em.Device.cpu()), m.valid(), m.train()):
        assert copy.lm_head.weight is copy.wte.weight
    f = m.fork(AD)
    assert f.wte.weight is not m.wte.weight and f.wte.weight.id == m.wte.weight.id


def test_the_gradient_of_a_tied_weight_sums_both_uses() -> None:
    rng = np.random.default_rng(1)
    m = _Tied(AD, em.float64)
    w = rng.standard_normal((V, D))
    m.wte.weight._replace(em.tensor(w, device=AD))
    idx = em.tensor(np.array([[1, 3, 5]]), device=AD)
    grads = GradientsParams.from_grads(m(idx).sum().backward(), m)
    assert len(grads) == 3
    torch = pytest.importorskip("torch")
    tw = torch.tensor(w, requires_grad=True)
    mid_w = torch.tensor(m.mid.weight.val().to_numpy())
    mid_b = torch.tensor(m.mid.bias.val().to_numpy())
    h = torch.tanh(tw[torch.tensor([[1, 3, 5]])] @ mid_w.T + mid_b)
    (h @ tw.T).sum().backward()
    got = grads.get(m.wte.weight.id)
    assert got is not None
    np.testing.assert_allclose(got.to_numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_three_adamw_steps_match_the_torch_tied_model() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    m = _Tied(AD, em.float64)
    init = {n: rng.standard_normal(p.shape) * 0.5 for n, p in m.named_parameters()}
    m.load_state_dict(init)
    idx = rng.integers(0, V, (3, 4))
    target = rng.integers(0, V, (3, 4))

    class TorchTied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = torch.nn.Embedding(V, D, dtype=torch.float64)
            self.mid = torch.nn.Linear(D, D, dtype=torch.float64)
            self.lm_head = torch.nn.Linear(D, V, bias=False, dtype=torch.float64)
            self.lm_head.weight = self.wte.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lm_head(torch.tanh(self.mid(self.wte(x))))

    tm = TorchTied()
    tm.load_state_dict({k: torch.tensor(v) for k, v in init.items()}, strict=False)
    assert sum(p.numel() for p in tm.parameters()) == m.num_params()
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-2, weight_decay=0.05)
    optim = AdamW(weight_decay=0.05)
    x, y = em.tensor(idx, device=AD), em.tensor(target.reshape(-1), device=AD)
    tx, ty = torch.tensor(idx), torch.tensor(target.reshape(-1))
    for _ in range(3):
        loss = F.cross_entropy(m(x).reshape((-1, V)), y)
        m = optim.step(1e-2, m, GradientsParams.from_grads(loss.backward(), m))
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(tx).reshape(-1, V), ty).backward()
        topt.step()
    assert m.lm_head.weight is m.wte.weight
    for name, p in m.named_parameters():
        want = dict(tm.named_parameters())[name].detach().numpy()
        np.testing.assert_allclose(p.val().to_numpy(), want, rtol=1e-10, atol=1e-12)


def test_save_load_and_training_records_keep_the_tie(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    m = _Tied(AD)
    idx = em.tensor(rng.integers(0, V, (2, 3)), device=AD)
    optim = AdamW()
    m = optim.step(1e-2, m, GradientsParams.from_grads(m(idx).sum().backward(), m))
    m.save(tmp_path / "m.safetensors")
    fresh = _Tied(AD).load(tmp_path / "m.safetensors")
    assert fresh.lm_head.weight is fresh.wte.weight
    assert fresh.wte.weight.id == m.wte.weight.id
    np.testing.assert_array_equal(
        fresh.lm_head.weight.val().to_numpy(), m.wte.weight.val().to_numpy()
    )
    save_training(tmp_path / "t.safetensors", m, optim, step=1)
    fresh, fopt = _Tied(AD), AdamW()
    assert load_training(tmp_path / "t.safetensors", fresh, fopt) == 1
    assert fresh.lm_head.weight is fresh.wte.weight
    assert len(fopt._state) == 3
    state = fopt.state_of(fresh.wte.weight.id)
    assert state is not None and state["step"] == 1


def test_a_state_dict_with_both_names_loads_when_equal_and_raises_when_not() -> None:
    m = _Tied()
    state = m.state_dict()
    w = np.arange(V * D, dtype=np.float32).reshape(V, D)
    fresh = _Tied().load_state_dict({**state, "wte.weight": w, "lm_head.weight": w})
    np.testing.assert_array_equal(fresh.lm_head.weight.val().to_numpy(), w)
    only_alias = {k: v for k, v in state.items() if k != "wte.weight"}
    fresh = _Tied().load_state_dict({**only_alias, "lm_head.weight": w})
    np.testing.assert_array_equal(fresh.wte.weight.val().to_numpy(), w)
    with pytest.raises(em.record.RecordError, match=r"lm_head\.weight and wte\.weight.*untied"):
        _Tied().load_state_dict({**state, "wte.weight": w, "lm_head.weight": w + 1})


def test_gpt_ties_its_head_and_rejects_an_untied_record(tmp_path: Path) -> None:
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, dropout=0.0)
    g = GPT(cfg, device=AD)
    assert g.lm_head.weight is g.wte.weight
    assert "lm_head.weight" not in dict(g.named_parameters())
    untied = g.state_dict()
    untied["lm_head.weight"] = untied["wte.weight"] + 1.0  # what an untied GPT saved
    em.record.save_module(_Dict(untied), tmp_path / "old.safetensors")
    with pytest.raises(em.record.RecordError, match="untied"):
        GPT(cfg, device=AD).load(tmp_path / "old.safetensors")
    save_training(tmp_path / "old_t.safetensors", _Dict(untied))
    with pytest.raises(em.record.RecordError, match="untied"):
        load_training(tmp_path / "old_t.safetensors", GPT(cfg, device=AD), AdamW())


class _Dict(nn.Module):
    """A module whose parameters are the given tensors, to write records of another layout."""

    def __init__(self, state: dict[str, em.Tensor]) -> None:
        super().__init__()
        self._state = state

    def state_dict(self) -> dict[str, em.Tensor]:
        return dict(self._state)
