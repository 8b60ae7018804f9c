"""Devices and their default autodiff context (API.md "Devices", SEMANTICS.md §1)."""

from __future__ import annotations

import pytest

import ember as em

Disabled = em.GradientCheckpointingStrategy.Disabled
Balanced = em.GradientCheckpointingStrategy.Balanced


def test_plain_device_has_no_context(device: em.Device) -> None:
    assert not device.is_autodiff()
    assert device.gradient_checkpointing_strategy() is None


def test_autodiff_device_defaults_to_disabled(device: em.Device) -> None:
    a = device.autodiff()
    assert a.is_autodiff()
    assert a.gradient_checkpointing_strategy() is Disabled
    assert not device.is_autodiff()  # the receiver is unchanged


def test_autodiff_is_idempotent_and_keeps_the_strategy(device: em.Device) -> None:
    a = device.autodiff()
    assert a.autodiff() is a
    g = a.gradient_checkpointing()
    assert g.autodiff() is g
    assert g.autodiff().gradient_checkpointing_strategy() is Balanced


def test_gradient_checkpointing_sets_balanced(device: em.Device) -> None:
    g = device.autodiff().gradient_checkpointing()
    assert g.is_autodiff()
    assert g.gradient_checkpointing_strategy() is Balanced


def test_gradient_checkpointing_on_plain_device_raises(device: em.Device) -> None:
    with pytest.raises(em.AutodiffError, match=r"gradient_checkpointing.*autodiff\(\)"):
        device.gradient_checkpointing()


def test_without_autodiff_gives_the_plain_device_idempotently(device: em.Device) -> None:
    g = device.autodiff().gradient_checkpointing()
    plain = g.without_autodiff()
    assert not plain.is_autodiff()
    assert plain.gradient_checkpointing_strategy() is None
    assert plain.without_autodiff() is plain
    assert device.without_autodiff() is device


def test_equality_and_hash_are_hardware_only(device: em.Device) -> None:
    a = device.autodiff()
    g = a.gradient_checkpointing()
    assert device == a == g
    assert hash(device) == hash(a) == hash(g)
    assert len({device, a, g}) == 1
    assert device != "cpu"


def test_devices_of_different_backends_differ() -> None:
    try:
        t = em.Device.torch("cpu")
    except em.DeviceError:
        pytest.skip("torch backend unavailable")
    assert t != em.Device.cpu()
    assert t.autodiff() != em.Device.cpu().autodiff()


def test_repr_shows_the_context(device: em.Device) -> None:
    plain, a = repr(device), repr(device.autodiff())
    g = repr(device.autodiff().gradient_checkpointing())
    assert "autodiff" not in plain
    assert "autodiff()" in a and "gradient_checkpointing" not in a
    assert "gradient_checkpointing()" in g
    assert plain.startswith("Device.")


def test_new_tensors_get_the_device_context(device: em.Device) -> None:
    assert not em.Tensor.zeros((2,), device=device).is_autodiff()
    t = em.Tensor.zeros((2,), device=device.autodiff())
    assert t.is_autodiff() and not t.is_tracked()
    assert t.gradient_checkpointing_strategy() is Disabled
    b = em.Tensor.from_data([1.0], device=device.autodiff().gradient_checkpointing())
    assert b.gradient_checkpointing_strategy() is Balanced


def test_tensor_device_reflects_its_own_context(device: em.Device) -> None:
    plain = em.Tensor.ones((2,), device=device)
    assert not plain.device.is_autodiff()
    b = em.Tensor.ones((2,), device=device.autodiff().gradient_checkpointing())
    assert b.device.gradient_checkpointing_strategy() is Balanced
    assert b.without_autodiff().device.gradient_checkpointing_strategy() is None
    assert b.device == device


def test_default_device_reads_ember_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_DEVICE", raising=False)
    assert em.default_device() == em.Device.cpu()
    monkeypatch.setenv("EMBER_DEVICE", "cpu")
    assert em.default_device() == em.Device.cpu()
    assert em.Tensor.zeros((1,)).device == em.Device.cpu()
    monkeypatch.setenv("EMBER_DEVICE", "tpu")
    with pytest.raises(em.DeviceError, match="EMBER_DEVICE"):
        em.default_device()


def test_cuda_without_a_gpu_raises_device_error() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(em.DeviceError):
        em.Device.cuda(0)


def test_bad_torch_placement_raises_device_error() -> None:
    with pytest.raises(em.DeviceError, match=r"Device\.torch"):
        em.Device.torch("gpu0")
