"""nn.InstanceNorm1d / 2d / 3d against torch's with the same state_dict (float64): training
outputs and x / weight / bias gradients, running statistics, evaluation with and without them,
unbatched inputs, state_dict round trips both ways, and the shape errors; on every backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

LAYERS = [
    (nn.InstanceNorm1d, torch.nn.InstanceNorm1d, (3, 4, 6)),
    (nn.InstanceNorm2d, torch.nn.InstanceNorm2d, (2, 4, 3, 5)),
    (nn.InstanceNorm3d, torch.nn.InstanceNorm3d, (2, 4, 2, 3, 2)),
]
IDS = ["1d", "2d", "3d"]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]
FLAG_IDS = ["plain", "affine", "tracked", "affine_tracked"]


def _pair(
    cls: type[nn.Module], tcls: type[torch.nn.Module], device: em.Device, **kw: object
) -> tuple[nn.Module, torch.nn.Module]:
    """An ember layer holding a torch layer's state (weight and bias randomised first)."""
    tm = tcls(4, **kw).double()
    with torch.no_grad():
        for p in tm.parameters():
            p.normal_()
    m = cls(4, **kw, device=device.autodiff(), dtype=em.float64)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    return m, tm


def _train_step(
    m: nn.Module, tm: torch.nn.Module, x: np.ndarray, device: em.Device, seed: int
) -> None:
    """One training forward on both, then compare the output and every gradient."""
    tm.zero_grad()
    ex = em.tensor(x, device=device.autodiff(), dtype=em.float64).require_grad()
    tx = torch.tensor(x, requires_grad=True)
    y, ty = m(ex), tm(tx)
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(seed).normal(size=x.shape)
    grads = (y * em.tensor(g, device=device, dtype=em.float64)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ex.grad(grads).to_numpy(), tx.grad.numpy(), atol=1e-10)  # type: ignore[union-attr]
    tparams = dict(tm.named_parameters())
    assert sorted(n for n, _ in m.named_parameters()) == sorted(tparams)
    for name, p in m.named_parameters():
        gp = p.val().grad(grads)
        assert gp is not None, name
        np.testing.assert_allclose(gp.to_numpy(), tparams[name].grad.numpy(), atol=1e-10)  # type: ignore[union-attr]


def _assert_buffers(m: nn.Module, tm: torch.nn.Module) -> None:
    tb = dict(tm.named_buffers())
    assert sorted(n for n, _ in m.named_buffers()) == sorted(tb)
    for name, b in m.named_buffers():
        np.testing.assert_allclose(b.to_numpy(), tb[name].numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("affine", "track"), FLAGS, ids=FLAG_IDS)
@pytest.mark.parametrize(("cls", "tcls", "shape"), LAYERS, ids=IDS)
def test_train_then_eval_match_torch(
    cls: type[nn.Module],
    tcls: type[torch.nn.Module],
    shape: tuple[int, ...],
    affine: bool,
    track: bool,
    device: em.Device,
    node_seed: int,
) -> None:
    rng = np.random.default_rng(node_seed)
    m, tm = _pair(cls, tcls, device, affine=affine, track_running_stats=track)
    for step in range(2):
        _train_step(m, tm, rng.normal(0.5, 2.0, size=shape), device, node_seed + step)
        _assert_buffers(m, tm)
    m.valid()
    tm.eval()
    x = rng.normal(size=shape)
    y = m(em.tensor(x, device=device, dtype=em.float64))
    assert not y.is_autodiff()
    with torch.no_grad():
        want = tm(torch.tensor(x)).numpy()
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10, atol=1e-12)
    if track:  # evaluation normalises with the running statistics, not the input's
        with torch.no_grad():
            own = torch.nn.functional.instance_norm(torch.tensor(x), weight=tm.weight, bias=tm.bias)
        assert not np.allclose(y.to_numpy(), own.numpy(), atol=1e-3)
    _assert_buffers(m, tm)  # frozen in evaluation


@pytest.mark.parametrize(("cls", "tcls", "shape"), LAYERS, ids=IDS)
def test_unbatched_input_matches_torch(
    cls: type[nn.Module],
    tcls: type[torch.nn.Module],
    shape: tuple[int, ...],
    device: em.Device,
    node_seed: int,
) -> None:
    m, tm = _pair(cls, tcls, device, affine=True, track_running_stats=True)
    x = np.random.default_rng(node_seed).normal(size=shape[1:])
    _train_step(m, tm, x, device, node_seed)
    _assert_buffers(m, tm)


def test_momentum_none_freezes_running_stats(device: em.Device, node_seed: int) -> None:
    # torch passes momentum 0.0 when it is None, and instance norm never counts batches
    m, tm = _pair(nn.InstanceNorm1d, torch.nn.InstanceNorm1d, device, momentum=None,
                  track_running_stats=True)  # fmt: skip
    x = np.random.default_rng(node_seed).normal(2.0, 3.0, size=(2, 4, 5))
    _train_step(m, tm, x, device, node_seed)
    _assert_buffers(m, tm)
    np.testing.assert_array_equal(m.running_mean.to_numpy(), np.zeros(4))
    assert int(m.num_batches_tracked.item()) == 0


def test_state_dict_round_trips_with_torch(device: em.Device, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    tm = torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True).double()
    with torch.no_grad():
        tm.weight.normal_()
        tm.bias.normal_()
        for _ in range(3):  # non-trivial running statistics
            tm(torch.tensor(rng.normal(1.0, 2.0, size=(2, 4, 3, 3))))
    tm.num_batches_tracked.fill_(7)
    m = nn.InstanceNorm2d(4, affine=True, track_running_stats=True, device=device,
                          dtype=em.float64)  # fmt: skip
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    assert list(m.state_dict()) == list(tm.state_dict())
    m.valid()
    tm.eval()
    x = rng.normal(size=(2, 4, 3, 3))
    with torch.no_grad():
        want = tm(torch.tensor(x)).numpy()
    y = m(em.tensor(x, device=device, dtype=em.float64))
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10, atol=1e-12)
    back = torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True).double()
    back.load_state_dict({k: torch.tensor(v.to_numpy()) for k, v in m.state_dict().items()})
    for k, v in tm.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k


@pytest.mark.parametrize(("affine", "track"), FLAGS, ids=FLAG_IDS)
def test_state_dict_keys_match_torch(affine: bool, track: bool) -> None:
    m = nn.InstanceNorm1d(3, affine=affine, track_running_stats=track)
    t = torch.nn.InstanceNorm1d(3, affine=affine, track_running_stats=track)
    assert list(m.state_dict()) == list(t.state_dict())


def test_save_load_is_bit_exact(tmp_path: Path, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    m = nn.InstanceNorm1d(3, affine=True, track_running_stats=True, dtype=em.float64)
    m(em.tensor(rng.normal(size=(2, 3, 4)), dtype=em.float64))
    m.save(tmp_path / "m.safetensors")
    other = nn.InstanceNorm1d(3, affine=True, track_running_stats=True, dtype=em.float64)
    other.load(tmp_path / "m.safetensors")
    for (n, a), (_, b) in zip(m.state_dict().items(), other.state_dict().items()):
        assert a.to_numpy().tobytes() == b.to_numpy().tobytes(), n


@pytest.mark.parametrize(("cls", "tcls", "shape"), LAYERS, ids=IDS)
@pytest.mark.parametrize("affine", [False, True])
def test_shape_errors(
    cls: type[nn.Module], tcls: type[torch.nn.Module], shape: tuple[int, ...], affine: bool
) -> None:
    name = cls.__name__
    m = cls(4, affine=affine)
    for bad in (shape[2:], shape + (2,)):  # one dim short of unbatched, one past batched
        with pytest.raises(em.ShapeError, match=rf"{name}: expected an input \(N, 4"):
            m(em.Tensor.zeros(bad))
    wrong = (shape[0], 5) + shape[2:]  # an error even without affine (torch warns there)
    with pytest.raises(em.ShapeError, match=rf"{name}: .*4 channels, got shape \({shape[0]}, 5"):
        m(em.Tensor.zeros(wrong))
