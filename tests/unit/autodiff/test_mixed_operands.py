"""Operands with different contexts, dtypes and devices (API.md "Operands with different
contexts", SEMANTICS.md §2 and §5)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember._core.device import Device

Disabled = em.GradientCheckpointingStrategy.Disabled
Balanced = em.GradientCheckpointingStrategy.Balanced
X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
C = np.array([[2.0, 3.0, -1.0], [0.5, -2.0, 4.0]])


def leaf(device: em.Device, data: np.ndarray = X) -> em.Tensor:
    return em.Tensor.from_data(data, device=device.autodiff(), dtype=em.float64).require_grad()


def plain(device: em.Device, data: np.ndarray = C) -> em.Tensor:
    return em.Tensor.from_data(data, device=device, dtype=em.float64)


def grad_of(t: em.Tensor, grads: em.Gradients) -> np.ndarray:
    g = t.grad(grads)
    assert g is not None
    return g.to_numpy()


# ---------------------------------------------------------------- plain operands are constants
@pytest.mark.parametrize("plain_first", [False, True])
def test_plain_operand_is_a_constant_in_either_order(device: em.Device, plain_first: bool) -> None:
    x, c = leaf(device), plain(device)
    y = (c * x) if plain_first else (x * c)
    assert y.is_autodiff() and y.is_tracked()
    z = (c - x) if plain_first else (x - c)
    grads = (y + z).sum().backward()
    np.testing.assert_allclose(grad_of(x, grads), C + (-1.0 if plain_first else 1.0))
    assert not c.is_autodiff() and c.grad(grads) is None
    assert len(grads) == 1


def test_plain_with_untracked_autodiff_is_untracked_autodiff(device: em.Device) -> None:
    u = em.Tensor.from_data(X, device=device.autodiff().gradient_checkpointing())
    for y in (u + plain(device).float(), plain(device).float() * u):
        assert y.is_autodiff() and not y.is_tracked()
        assert y.gradient_checkpointing_strategy() is Balanced


def test_plain_ops_stay_plain(device: em.Device) -> None:
    y = plain(device).exp() * plain(device)
    assert not y.is_autodiff()


@pytest.mark.parametrize("op", ["cat", "stack"])
def test_plain_members_of_list_inputs_are_constants(device: em.Device, op: str) -> None:
    x, c = leaf(device), plain(device)
    w = np.arange(1.0, 19.0)
    fn = em.Tensor.cat if op == "cat" else em.Tensor.stack
    for members in ([c, x, x], [x, c, x], [x, x, c]):
        y = fn(members, 0)
        assert y.is_tracked()
        wt = em.Tensor.from_data(w.reshape(y.shape), device=device, dtype=em.float64)
        grads = (y * wt).sum().backward()
        blocks = w.reshape(3, 2, 3)
        expected = sum(blocks[i] for i, m in enumerate(members) if m is x)
        np.testing.assert_array_equal(grad_of(x, grads), expected)
        assert not c.is_autodiff() and c.grad(grads) is None


def test_list_of_only_plain_members_is_plain(device: em.Device) -> None:
    assert not em.Tensor.cat([plain(device), plain(device)], 1).is_autodiff()


# ---------------------------------------------------------------- strategies
def test_mixed_strategies_raise_naming_both(device: em.Device) -> None:
    x = leaf(device)
    b = em.Tensor.from_data(C, device=device.autodiff().gradient_checkpointing(), dtype=em.float64)
    for fn in (lambda: x + b, lambda: b * x, lambda: em.Tensor.cat([x, b], 0)):
        with pytest.raises(em.AutodiffError, match=r"(Disabled.*Balanced|Balanced.*Disabled)"):
            fn()
    # the inputs are unchanged and the error names the fix
    assert x.is_require_grad() and b.gradient_checkpointing_strategy() is Balanced
    with pytest.raises(em.AutodiffError, match="with_gradient_checkpointing_strategy"):
        _ = x @ b.transpose()
    aligned = b.with_gradient_checkpointing_strategy(Disabled)
    grads = (x * aligned).sum().backward()
    np.testing.assert_array_equal(grad_of(x, grads), C)


def test_operand_created_on_the_tensor_device_shares_its_strategy(device: em.Device) -> None:
    x = leaf(device).with_gradient_checkpointing_strategy(Balanced)
    c = em.Tensor.from_data(C, device=x.device, dtype=em.float64)
    grads = (x * c).sum().backward()
    np.testing.assert_array_equal(grad_of(x, grads), C)


# ---------------------------------------------------------------- int and bool results
def test_int_and_bool_results_keep_the_context(device: em.Device) -> None:
    x = leaf(device).with_gradient_checkpointing_strategy(Balanced)
    for r in (x.argmax(1), x.argmin(0), x > 0.0, x == x, x.lower_equal(x * 2.0), x.int()):
        assert r.is_autodiff() and not r.is_tracked()
        assert r.gradient_checkpointing_strategy() is Balanced
        assert not r.dtype.is_float
    np.testing.assert_array_equal(x.argmax(1).to_numpy(), [2, 0])


def test_float_of_a_mask_is_an_untracked_constant(device: em.Device) -> None:
    x = leaf(device)
    mask = (x > 0.0).float()
    assert mask.is_autodiff() and not mask.is_tracked() and mask.dtype is em.float32
    grads = (x * mask.cast(em.float64)).sum().backward()
    np.testing.assert_array_equal(grad_of(x, grads), (X > 0).astype(np.float64))
    assert len(grads) == 1


# ---------------------------------------------------------------- devices
def second_numpy_device() -> em.Device:
    """A distinct NumPy device ("cpu:1"): same backend class, different hardware identity."""
    from ember.backend.numpy.backend import NumpyBackend

    d = Device("numpy", "cpu:1")
    b = NumpyBackend("cpu:1")
    d.b = b
    return d


def test_mixed_devices_raise_device_error() -> None:
    cpu, other = em.Device.cpu(), second_numpy_device()
    assert cpu != other
    a = em.Tensor.from_data(X, device=cpu)
    b = em.Tensor.from_data(C, device=other)
    for name, fn in (
        ("add", lambda: a + b),
        ("mul", lambda: b * a),
        ("cat", lambda: em.Tensor.cat([a, b], 0)),
        ("matmul", lambda: a @ b.transpose()),
    ):
        with pytest.raises(em.DeviceError, match=rf"{name}.*to_device"):
            fn()
    la = leaf(cpu)
    with pytest.raises(em.DeviceError):
        _ = la + b.autodiff()
    assert la.is_require_grad()
    np.testing.assert_array_equal(a.to_numpy(), X)
    np.testing.assert_array_equal(b.to_numpy(), C)


def test_to_device_between_distinct_devices_carries_gradients() -> None:
    cpu, other = em.Device.cpu(), second_numpy_device()
    x = leaf(cpu)
    c = em.Tensor.from_data(C, device=other, dtype=em.float64)
    y = x.to_device(other)
    assert y.device == other and y.is_tracked()
    grads = (y * c).sum().backward()
    g = x.grad(grads)
    assert g is not None and g.device == cpu
    np.testing.assert_array_equal(g.to_numpy(), C)


def test_mixed_devices_across_backends_raise() -> None:
    try:
        t = em.Device.torch("cpu")
    except em.DeviceError:
        pytest.skip("torch backend unavailable")
    a = em.Tensor.from_data(X, device=em.Device.cpu())
    b = em.Tensor.from_data(X, device=t)
    with pytest.raises(em.DeviceError, match="add"):
        _ = a + b
