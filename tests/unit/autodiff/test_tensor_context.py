"""A tensor's autodiff context and the leaf/lineage operations (API.md autodiff table, §1, §2, §4,
§6 of SEMANTICS.md)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

Disabled = em.GradientCheckpointingStrategy.Disabled
Balanced = em.GradientCheckpointingStrategy.Balanced
X = [[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]]


def leaf(device: em.Device, data: object = X) -> em.Tensor:
    return em.Tensor.from_data(data, device=device.autodiff(), dtype=em.float64).require_grad()


def every_kind(device: em.Device) -> dict[str, em.Tensor]:
    ad = device.autodiff()
    x = leaf(device)
    consumed = x * 2.0
    consumed.sum().backward()
    return {
        "plain": em.Tensor.from_data(X, device=device),
        "plain int": em.Tensor.from_data([1, 2], device=device),
        "untracked": em.Tensor.from_data(X, device=ad),
        "untracked balanced": em.Tensor.from_data(X, device=ad.gradient_checkpointing()),
        "int autodiff": em.Tensor.from_data([1, 2], device=ad),
        "leaf": x,
        "non-leaf": x.exp(),
        "consumed non-leaf": consumed,
        "detached leaf": x.detach(),
        "detached non-leaf": x.exp().detach(),
        "argmax": x.argmax(1),
        "mask": x > 0.0,
        "cut": x.exp().set_require_grad(False),
        "inner": x.inner(),
    }


def test_implication_chain_and_strategy_iff_autodiff(device: em.Device) -> None:
    for name, t in every_kind(device).items():
        if t.is_require_grad():
            assert t.is_tracked(), name
        if t.is_tracked():
            assert t.is_autodiff(), name
        assert (t.gradient_checkpointing_strategy() is not None) == t.is_autodiff(), name


def test_context_of_each_kind(device: em.Device) -> None:
    k = every_kind(device)
    flags = {n: (t.is_autodiff(), t.is_tracked(), t.is_require_grad()) for n, t in k.items()}
    assert flags["plain"] == (False, False, False)
    assert flags["untracked"] == (True, False, False)
    assert flags["int autodiff"] == (True, False, False)
    assert flags["leaf"] == (True, True, True)
    assert flags["non-leaf"] == (True, True, False)
    assert flags["consumed non-leaf"] == (True, True, False)  # stays tracked after backward
    assert flags["detached leaf"] == (True, True, True)
    assert flags["detached non-leaf"] == (True, False, False)
    assert flags["argmax"] == (True, False, False)
    assert flags["mask"] == (True, False, False)
    assert flags["cut"] == (True, False, False)
    assert flags["inner"] == (False, False, False)


# ---------------------------------------------------------------- require_grad / set_require_grad
def test_require_grad_on_untracked_leaf_returns_a_new_handle(device: em.Device) -> None:
    t = em.Tensor.from_data(X, device=device.autodiff())
    r = t.require_grad()
    assert r.is_require_grad() and r.is_tracked()
    assert not t.is_tracked()  # the receiver is unchanged
    np.testing.assert_array_equal(r.to_numpy(), t.to_numpy())
    assert r.gradient_checkpointing_strategy() is Disabled


def test_require_grad_keeps_a_balanced_strategy(device: em.Device) -> None:
    t = em.Tensor.ones((2,), device=device.autodiff().gradient_checkpointing()).require_grad()
    assert t.gradient_checkpointing_strategy() is Balanced


def test_require_grad_on_a_grad_leaf_is_unchanged(device: em.Device) -> None:
    x = leaf(device)
    y = x.require_grad()
    z = x.set_require_grad(True)
    grads = (x * 3.0).sum().backward()
    for h in (x, y, z):  # the same leaf: every handle reads the one gradient
        g = h.grad(grads)
        assert g is not None
        np.testing.assert_array_equal(g.to_numpy(), np.full((2, 3), 3.0))


def test_require_grad_on_a_tracked_non_leaf_raises(device: em.Device) -> None:
    y = leaf(device).exp()
    with pytest.raises(em.AutodiffError, match=r"set_require_grad.*'exp'.*detach"):
        y.require_grad()
    with pytest.raises(em.AutodiffError):
        y.set_require_grad(True)
    assert y.is_tracked() and not y.is_require_grad()


def test_require_grad_on_a_plain_float_raises(device: em.Device) -> None:
    t = em.Tensor.from_data(X, device=device)
    with pytest.raises(em.AutodiffError, match=r"set_require_grad.*autodiff\(\)"):
        t.require_grad()
    assert not t.is_autodiff()


@pytest.mark.parametrize("dtype", [em.int32, em.int64, em.bool])
@pytest.mark.parametrize("autodiff", [False, True])
def test_require_grad_on_int_or_bool_raises_dtype_error(
    device: em.Device, dtype: em.DType, autodiff: bool
) -> None:
    d = device.autodiff() if autodiff else device
    t = em.Tensor.zeros((2,), device=d, dtype=dtype)
    with pytest.raises(em.DTypeError, match=r"set_require_grad.*float"):
        t.require_grad()
    assert t.is_autodiff() == autodiff and not t.is_tracked()


def test_set_require_grad_false_on_a_leaf_gives_an_untracked_autodiff_tensor(
    device: em.Device,
) -> None:
    x = em.Tensor.ones((2,), device=device.autodiff().gradient_checkpointing()).require_grad()
    c = x.set_require_grad(False)
    assert c.is_autodiff() and not c.is_tracked()
    assert c.gradient_checkpointing_strategy() is Balanced
    assert x.is_require_grad()


def test_set_require_grad_false_cuts_all_upstream_history(device: em.Device) -> None:
    x = leaf(device)
    z = (x * 2.0).set_require_grad(False)
    assert z.is_autodiff() and not z.is_tracked()
    grads = (z * x).sum().backward()
    g = x.grad(grads)
    assert g is not None  # only the direct use counts: d(z*x)/dx = z = 2x, z a constant
    np.testing.assert_allclose(g.to_numpy(), 2.0 * np.array(X))


def test_set_require_grad_false_on_every_kind(device: em.Device) -> None:
    for name, t in every_kind(device).items():
        c = t.set_require_grad(False)
        assert not c.is_tracked(), name
        assert c.is_autodiff() == t.is_autodiff(), name
        assert c.gradient_checkpointing_strategy() is t.gradient_checkpointing_strategy(), name
        assert c.dtype is t.dtype and c.shape == t.shape, name
        np.testing.assert_array_equal(c.to_numpy(), t.to_numpy())


def test_set_require_grad_false_on_plain_is_unchanged(device: em.Device) -> None:
    t = em.Tensor.from_data(X, device=device)
    assert t.set_require_grad(False) is t


# ---------------------------------------------------------------- detach
def test_detach_of_a_leaf_keeps_require_grad_with_its_own_gradient(device: em.Device) -> None:
    x = leaf(device)
    xd = x.detach()
    assert xd.is_require_grad() and xd.is_autodiff()
    grads = (xd * xd).sum().backward()
    gd = xd.grad(grads)
    assert gd is not None
    np.testing.assert_allclose(gd.to_numpy(), 2.0 * np.array(X))
    assert x.grad(grads) is None  # a new identity: the original leaf gets nothing
    grads = (x * 3.0).sum().backward()
    assert xd.grad(grads) is None
    g = x.grad(grads)
    assert g is not None
    np.testing.assert_allclose(g.to_numpy(), np.full((2, 3), 3.0))


def test_detach_of_a_non_leaf_is_untracked(device: em.Device) -> None:
    strategy_device = device.autodiff().gradient_checkpointing()
    x = em.Tensor.ones((2,), device=strategy_device).require_grad()
    y = (x * 2.0).detach()
    assert y.is_autodiff() and not y.is_tracked()
    assert y.gradient_checkpointing_strategy() is Balanced
    np.testing.assert_array_equal(y.to_numpy(), [2.0, 2.0])
    with pytest.raises(em.AutodiffError):
        y.sum().backward()


def test_detach_of_plain_is_unchanged(device: em.Device) -> None:
    t = em.Tensor.from_data(X, device=device)
    assert t.detach() is t


def test_an_older_handle_cannot_read_the_gradient(device: em.Device) -> None:
    old = em.Tensor.from_data(X, device=device.autodiff(), dtype=em.float64)
    x = old.require_grad()
    grads = (x * x).sum().backward()
    assert not old.is_tracked()
    assert old.grad(grads) is None
    assert x.grad(grads) is not None


# ---------------------------------------------------------------- without_autodiff / autodiff
def test_without_autodiff_and_inner_drop_the_graph(device: em.Device) -> None:
    y = leaf(device).exp()
    for p in (y.without_autodiff(), y.inner()):
        assert not p.is_autodiff() and not p.is_tracked()
        assert p.gradient_checkpointing_strategy() is None
        np.testing.assert_array_equal(p.to_numpy(), np.exp(np.array(X)))
        assert p._node is None  # no graph reference kept
        lifted = p.autodiff()
        assert lifted.is_autodiff() and not lifted.is_tracked()
    assert y.is_tracked()


def test_without_autodiff_on_plain_is_unchanged(device: em.Device) -> None:
    t = em.Tensor.from_data(X, device=device)
    assert t.without_autodiff() is t
    assert t.inner() is t


def test_autodiff_lifts_plain_to_untracked_disabled(device: em.Device) -> None:
    t = em.Tensor.from_data(X, device=device).autodiff()
    assert t.is_autodiff() and not t.is_tracked()
    assert t.gradient_checkpointing_strategy() is Disabled


def test_autodiff_on_autodiff_is_unchanged(device: em.Device) -> None:
    x = leaf(device)
    assert x.autodiff() is x
    b = em.Tensor.ones((2,), device=device.autodiff().gradient_checkpointing())
    assert b.autodiff().gradient_checkpointing_strategy() is Balanced


# ---------------------------------------------------------------- strategies
def test_with_gradient_checkpointing_strategy_keeps_the_graph(device: em.Device) -> None:
    x = leaf(device)
    y = x.exp()
    yb = y.with_gradient_checkpointing_strategy(Balanced)
    assert yb.gradient_checkpointing_strategy() is Balanced
    assert yb.is_tracked() and y.gradient_checkpointing_strategy() is Disabled
    grads = (yb * 2.0).sum().backward()
    g = x.grad(grads)
    assert g is not None
    np.testing.assert_allclose(g.to_numpy(), 2.0 * np.exp(np.array(X)))
    xb = x.with_gradient_checkpointing_strategy(Balanced)
    assert xb.is_require_grad()


def test_with_gradient_checkpointing_strategy_on_plain_raises(device: em.Device) -> None:
    t = em.Tensor.ones((2,), device=device)
    with pytest.raises(em.AutodiffError, match=r"with_gradient_checkpointing_strategy.*autodiff"):
        t.with_gradient_checkpointing_strategy(Balanced)


# ---------------------------------------------------------------- to_device
def test_to_device_same_device_keeps_a_require_grad_leaf(device: em.Device) -> None:
    x = leaf(device)
    for target in (device, device.autodiff(), device.autodiff().gradient_checkpointing()):
        y = x.to_device(target)
        assert y.is_require_grad()
        assert y.gradient_checkpointing_strategy() is Disabled  # target config ignored
        grads = (y * 5.0).sum().backward()
        g = x.grad(grads)
        assert g is not None
        np.testing.assert_array_equal(g.to_numpy(), np.full((2, 3), 5.0))


def test_to_device_keeps_the_source_context(device: em.Device) -> None:
    plain = em.Tensor.ones((2,), device=device)
    assert not plain.to_device(device.autodiff()).is_autodiff()
    ad = em.Tensor.ones((2,), device=device.autodiff().gradient_checkpointing())
    moved = ad.to_device(device)
    assert moved.gradient_checkpointing_strategy() is Balanced


def test_to_device_across_backends_is_differentiable() -> None:
    try:
        other = em.Device.torch("cpu")
    except em.DeviceError:
        pytest.skip("torch backend unavailable")
    x = leaf(em.Device.cpu())
    y = x.to_device(other)
    assert y.device == other and y.is_tracked() and not y.is_require_grad()
    grads = (y * y).sum().backward()
    g = x.grad(grads)
    assert g is not None and g.device == em.Device.cpu()
    np.testing.assert_allclose(g.to_numpy(), 2.0 * np.array(X))
    back = y.inner().to_device(em.Device.cpu())
    np.testing.assert_array_equal(back.to_numpy(), np.array(X))
    # and the other way: a torch leaf used on the NumPy device
    t = leaf(other)
    u = t.to_device(em.Device.cpu()).with_gradient_checkpointing_strategy(Balanced)
    g = t.grad((u.exp() * 2.0).sum().backward())
    assert g is not None and g.device == other
    np.testing.assert_allclose(g.to_numpy(), 2.0 * np.exp(np.array(X)))


def test_to_device_then_detach_makes_a_new_trainable_leaf(device: em.Device) -> None:
    x = leaf(device)
    y = (x * 1.0).to_device(device).detach().require_grad()
    grads = (y * 2.0).sum().backward()
    assert x.grad(grads) is None
    assert y.grad(grads) is not None
