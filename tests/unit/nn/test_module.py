"""The module system: tracking, naming, training state (SEMANTICS.md §8), fork, to_device."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.nn import Linear, Module, Param, ParamId
from ember.record import RecordError

AD = em.Device.cpu().autodiff()


class Mlp(Module):
    def __init__(self, device: em.Device | None = AD) -> None:
        super().__init__()
        self.l1 = Linear(4, 8, device=device, dtype=em.float64)
        self.l2 = Linear(8, 2, device=device, dtype=em.float64)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.l2(em.nn.functional.relu(self.l1(x)))


def _x() -> em.Tensor:
    return em.Tensor.from_data(np.linspace(-1, 1, 12).reshape(3, 4), dtype=em.float64)


def test_named_parameters_are_dotted_and_ordered() -> None:
    m = Mlp()
    assert [n for n, _ in m.named_parameters()] == ["l1.weight", "l1.bias", "l2.weight", "l2.bias"]
    assert m.num_params() == 4 * 8 + 8 + 8 * 2 + 2
    assert all(isinstance(p, Param) for p in m.parameters())
    assert m.devices() == [em.Device.cpu()]
    assert m.l1.weight.shape == (8, 4)


def test_params_on_autodiff_device_are_require_grad_leaves() -> None:
    m = Mlp()
    assert all(p.val().is_require_grad() for p in m.parameters())
    plain = Mlp(em.Device.cpu())
    assert not any(p.val().is_autodiff() for p in plain.parameters())


def test_param_id_round_trips_through_text() -> None:
    pid = ParamId()
    assert ParamId.parse(str(pid)) == pid and hash(ParamId.parse(str(pid))) == hash(pid)
    assert ParamId() != pid
    with pytest.raises(ValueError, match="hex"):
        ParamId.parse("not-hex")


def test_reassigning_and_deleting_attributes_updates_tracking() -> None:
    m = Mlp()
    m.l2 = Linear(8, 3, device=AD)
    assert [n for n, _ in m.named_parameters()][-2:] == ["l2.weight", "l2.bias"]
    assert m.l2.weight.shape == (3, 8)
    del m.l2
    assert [n for n, _ in m.named_parameters()] == ["l1.weight", "l1.bias"]
    with pytest.raises(TypeError, match="expected a Param"):
        m.l1.weight = em.Tensor.zeros((8, 4))


def test_forgotten_super_init_is_explained() -> None:
    class Bad(Module):
        def __init__(self) -> None:
            self.w = Param(em.Tensor.zeros((1,)))

    with pytest.raises(AttributeError, match="super"):
        Bad()


def test_valid_makes_plain_and_train_restores() -> None:
    dev = em.Device.cpu().autodiff().gradient_checkpointing()
    m = Mlp(dev)
    m.valid()
    assert not m.training and not m.l1.training
    assert all(not p.val().is_autodiff() for p in m.parameters())
    m.valid()  # idempotent: the remembered strategy survives a second call
    m.train()
    assert m.training
    for p in m.parameters():
        assert p.val().is_require_grad()
        assert (
            p.val().gradient_checkpointing_strategy() is em.GradientCheckpointingStrategy.Balanced
        )


def test_valid_forward_is_plain_and_matches_train_forward() -> None:
    m = Mlp()
    y_train = m(_x())
    assert y_train.is_tracked()
    y_valid = m.valid()(_x())
    assert not y_valid.is_autodiff()
    np.testing.assert_array_equal(y_train.to_numpy(), y_valid.to_numpy())


def test_no_grad_persists_across_valid_and_train() -> None:
    m = Mlp().no_grad()
    assert all(p.val().is_autodiff() and not p.val().is_require_grad() for p in m.parameters())
    m.valid().train()
    assert all(p.val().is_autodiff() and not p.val().is_require_grad() for p in m.parameters())
    m.set_require_grad(True)
    assert all(p.val().is_require_grad() for p in m.parameters())


def test_freeze_switches_trainability_and_flags_but_gradients_flow_through() -> None:
    m = Mlp()
    m.freeze()
    assert not m.training and not m.l1.training
    assert not any(p.val().is_require_grad() for p in m.parameters())
    x = _x().autodiff().require_grad()
    grads = m(x).sum().backward()
    assert x.grad(grads) is not None and len(grads) == 1
    m.valid().train()
    assert not m.training and not any(p.is_require_grad() for p in m.parameters())
    m.unfreeze()
    assert m.training and all(p.is_require_grad() for p in m.parameters())


def test_fork_is_independent_and_keeps_ids() -> None:
    m = Mlp()
    f = m.fork(em.Device.cpu().autodiff())
    assert [p.id for p in f.parameters()] == [p.id for p in m.parameters()]
    assert all(p.val().is_require_grad() for p in f.parameters())
    f.l1.weight._replace(em.Tensor.zeros((8, 4), dtype=em.float64))
    assert not np.all(m.l1.weight.val().to_numpy() == 0)
    # the fork's graph is its own: its gradients don't reach the source's leaves
    grads = f(_x()).sum().backward()
    assert m.l1.weight.val().grad(grads) is None
    assert f.l1.bias.val().grad(grads) is not None


def test_fork_onto_autodiff_device_from_valid_mode() -> None:
    m = Mlp().valid()
    f = m.fork(em.Device.cpu().autodiff())
    assert all(p.val().is_require_grad() for p in f.parameters())
    assert all(not p.val().is_autodiff() for p in m.parameters())


def test_to_device_same_device_is_equivalent_and_differentiable() -> None:
    m = Mlp()
    moved = m.to_device(em.Device.cpu())
    assert moved is not m
    assert [p.id for p in moved.parameters()] == [p.id for p in m.parameters()]
    grads = moved(_x()).sum().backward()
    assert m.l1.weight.val().grad(grads) is not None


def test_state_dict_round_trip_replaces_values_in_place() -> None:
    a, b = Mlp(), Mlp()
    ids = [p.id for p in b.parameters()]
    b.load_state_dict(a.state_dict())
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_array_equal(pa.val().to_numpy(), pb.val().to_numpy(), err_msg=n)
        assert pb.val().is_require_grad()
    assert [p.id for p in b.parameters()] == ids


def test_load_state_dict_lists_every_mismatch() -> None:
    m = Mlp()
    sd = m.state_dict()
    del sd["l1.bias"]
    sd["extra"] = em.Tensor.zeros((1,))
    with pytest.raises(RecordError, match=r"missing: \['l1.bias'\].*unexpected: \['extra'\]"):
        m.load_state_dict(sd)
    sd = m.state_dict()
    sd["l1.weight"] = em.Tensor.zeros((4, 8), dtype=em.float64)
    sd["l2.weight"] = em.Tensor.zeros((1, 8), dtype=em.float64)
    with pytest.raises(em.ShapeError, match=r"l1.weight: expected \(8, 4\).*l2.weight"):
        m.load_state_dict(sd)
    sd = m.state_dict()
    sd["l2.bias"] = em.Tensor.zeros((2,), dtype=em.float32)
    with pytest.raises(em.DTypeError, match=r"l2\.bias: expected float64, got float32"):
        m.load_state_dict(sd)


def test_repr_shows_children() -> None:
    text = repr(Mlp())
    assert "(l1): Linear(4, 8, bias=True)" in text and text.startswith("Mlp(")


def _torch_device() -> em.Device:
    try:
        return em.Device.torch("cpu")
    except em.DeviceError as e:
        pytest.skip(f"torch backend unavailable: {e}")


def test_fork_across_backends_trains_and_gradients_come_home() -> None:
    from ember.optim import SGD, GradientsParams

    tdev = _torch_device()
    m = Mlp()
    f = m.fork(tdev.autodiff())
    assert f.devices() == [tdev] and m.devices() == [em.Device.cpu()]
    x = _x().to_device(tdev)
    grads = GradientsParams.from_grads(f(x).sum().backward(), f)
    home = grads.to_device(em.Device.cpu(), m)
    assert all(g.device == em.Device.cpu() for _, g in home.items())
    before = m.l1.weight.val().to_numpy()
    g = home.get(m.l1.weight.id)
    assert g is not None
    SGD().step(0.1, m, home)
    np.testing.assert_allclose(m.l1.weight.val().to_numpy(), before - 0.1 * g.to_numpy())
    # the fork's parameters are untouched by the source's step
    np.testing.assert_array_equal(f.l1.weight.val().to_numpy(), before)


def test_to_device_across_backends_is_a_recorded_move() -> None:
    tdev = _torch_device()
    m = Mlp()
    moved = m.to_device(tdev)
    assert moved.devices() == [tdev]
    assert moved.l1.weight.val().is_tracked() and not moved.l1.weight.val().is_require_grad()
    grads = moved(_x().to_device(tdev)).sum().backward()
    g = m.l1.weight.val().grad(grads)
    assert g is not None and g.device == em.Device.cpu()


def test_step_moves_state_to_the_parameters_device() -> None:
    from ember.optim import Adam, GradientsParams

    tdev = _torch_device()
    m = Linear(2, 2, device=AD, dtype=em.float64)
    optim = Adam()
    grads = GradientsParams()
    grads.register(m.weight.id, em.Tensor.ones((2, 2), dtype=em.float64))
    optim.step(0.1, m, grads)
    f = m.fork(tdev.autodiff())
    grads = GradientsParams()
    grads.register(m.weight.id, em.Tensor.ones((2, 2), dtype=em.float64))  # on cpu
    optim.step(0.1, f, grads)
    state = optim.state_of(m.weight.id)
    assert state is not None and state["exp_avg"].device == tdev  # type: ignore[union-attr]
    assert f.weight.val().device.without_autodiff() == tdev


def test_module_list_and_dict_track_their_children() -> None:
    blocks = em.nn.ModuleList([Linear(2, 2, device=AD), Linear(2, 2, device=AD)])
    blocks.append(Linear(2, 3, device=AD))
    assert len(blocks) == 3 and blocks[-1].weight.shape == (3, 2)  # type: ignore[attr-defined]
    assert [n for n, _ in blocks.named_parameters()][::2] == ["0.weight", "1.weight", "2.weight"]
    heads = em.nn.ModuleDict({"cls": Linear(2, 4, device=AD)})
    heads["reg"] = Linear(2, 1, device=AD)
    assert "reg" in heads and list(heads) == ["cls", "reg"] and len(heads) == 2
    assert heads.keys() == ["cls", "reg"] and heads["cls"] is heads.values()[0]
    with pytest.raises(KeyError):
        heads["missing"]
    with pytest.raises(TypeError, match="expected a Module"):
        heads["bad"] = 3  # type: ignore[assignment]

    class Net(Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = blocks
            self.heads = heads

        def forward(self, x: em.Tensor) -> em.Tensor:
            for b in list(self.blocks)[:2]:
                x = b(x)
            return self.heads["cls"](x)

    net = Net()
    assert [n for n, _ in net.named_modules()][:3] == ["", "blocks", "blocks.0"]
    assert net(em.Tensor.ones((5, 2))).shape == (5, 4)
    f = net.fork(em.Device.cpu().autodiff())
    assert isinstance(f.blocks, em.nn.ModuleList) and len(f.blocks) == 3
    assert [p.id for p in f.parameters()] == [p.id for p in net.parameters()]


def test_sequential_indexing_and_buffers_follow_the_module() -> None:
    seq = em.nn.Sequential(Linear(3, 4, device=AD), em.nn.BatchNorm1d(4, device=AD))
    assert len(seq) == 2 and isinstance(seq[1], em.nn.BatchNorm1d)
    assert [n for n, _ in seq.named_buffers()] == [
        "1.running_mean",
        "1.running_var",
        "1.num_batches_tracked",
    ]
    assert set(seq.state_dict()) == {n for n, _ in seq.named_parameters()} | {
        n for n, _ in seq.named_buffers()
    }
    assert seq.num_params() == 3 * 4 + 4 + 4 + 4  # buffers are not parameters
    seq(em.Tensor.ones((6, 3), device=AD))
    assert not seq[1].running_mean.is_autodiff()  # type: ignore[union-attr]
    f = seq.fork(em.Device.cpu())
    assert int(f[1].num_batches_tracked.item()) == 1  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="buffer"):
        seq[1].running_mean = 3  # type: ignore[assignment]


def test_param_reports_its_tensor() -> None:
    p = Param(em.Tensor.zeros((2, 3), device=AD, dtype=em.float64))
    assert p.shape == (2, 3) and p.dtype is em.float64 and p.numel() == 6
    assert p.is_require_grad() and p.is_trainable() and p.device.is_autodiff()
    assert "shape=(2, 3)" in repr(p)
    frozen = Param(em.Tensor.zeros((2,), device=AD), require_grad=False)
    assert frozen.val().is_autodiff() and not frozen.is_require_grad()
    with pytest.raises(TypeError, match=r"em\.Tensor"):
        Param(np.zeros(2))  # type: ignore[arg-type]


def test_train_on_a_training_module_keeps_the_leaves() -> None:
    m = Mlp()
    w = m.l1.weight.val()
    m.train().set_require_grad(True)
    assert m.l1.weight.val() is w
    grads = m(_x()).sum().backward()
    assert w.grad(grads) is not None
