"""``Module.register_forward_hook`` / ``register_forward_pre_hook`` as PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
from ember.nn import Linear, Module

torch = pytest.importorskip("torch")
TOL = {"rtol": 1e-12, "atol": 1e-12}


class _Twice(Module):
    def __init__(self, device: em.Device) -> None:
        super().__init__()
        self.fc = Linear(3, 2, device=device, dtype=em.float64)

    def forward(self, x: em.Tensor, scale: float = 1.0) -> em.Tensor:
        return self.fc(x) * scale


def _pair(device: em.Device) -> tuple[_Twice, Any]:
    model = _Twice(device.autodiff())
    ref = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(model.fc.weight.val().to_numpy()))
        ref.bias.copy_(torch.tensor(model.fc.bias.val().to_numpy()))
    return model, ref


def test_hooks_change_inputs_and_outputs_like_torch(device: em.Device, node_seed: int) -> None:
    model, ref = _pair(device)
    a = np.random.default_rng(node_seed).normal(size=(4, 3))
    calls: list[str] = []

    def pre(m: Any, args: tuple[Any, ...]) -> Any:
        calls.append("pre")
        return (args[0] * 2.0,)

    def post(m: Any, args: tuple[Any, ...], out: Any) -> Any:
        calls.append("post")
        assert m is model.fc or m is ref
        return out.tanh()

    hs = [model.fc.register_forward_pre_hook(pre), model.fc.register_forward_hook(post)]
    ref.register_forward_pre_hook(pre)
    ref.register_forward_hook(post)
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64)
    y = model(x)
    ty = ref(torch.tensor(a))
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), **TOL)
    assert calls == ["pre", "post", "pre", "post"]
    # gradients flow through what the hooks did
    grads = y.sum().backward()
    ty.sum().backward()
    got = model.fc.weight.val().grad(grads)
    assert got is not None
    np.testing.assert_allclose(got.to_numpy(), ref.weight.grad.numpy(), **TOL)
    for h in hs:
        h.remove()
    plain = model(x)
    np.testing.assert_allclose(plain.to_numpy(), model.fc(x).to_numpy(), **TOL)
    assert "_call_hooks" not in model.fc.__dict__  # back on the hook-free path


def test_none_keeps_and_keywords_pass_through(device: em.Device) -> None:
    model, _ = _pair(device)
    seen: list[tuple[Any, ...]] = []
    model.register_forward_pre_hook(lambda m, args: seen.append(args))  # type: ignore[func-returns-value]
    model.register_forward_hook(lambda m, args, out: None)
    x = em.Tensor.ones((1, 3), device=device, dtype=em.float64)
    out = model(x, scale=3.0)
    np.testing.assert_allclose(out.to_numpy(), model.fc(x).to_numpy() * 3.0, **TOL)
    assert len(seen) == 1 and seen[0][0] is x


def test_a_non_tuple_pre_hook_result_is_one_argument(device: em.Device) -> None:
    model, _ = _pair(device)
    model.fc.register_forward_pre_hook(lambda m, args: args[0] * 0.0)
    x = em.Tensor.ones((1, 3), device=device, dtype=em.float64)
    np.testing.assert_allclose(
        model.fc(x).to_numpy(), model.fc.bias.val().to_numpy()[None, :], **TOL
    )


def test_handles_remove_one_registration_each(device: em.Device) -> None:
    model, _ = _pair(device)
    count = [0]

    def hook(m: Any, args: Any, out: Any) -> None:
        count[0] += 1

    a = model.register_forward_hook(hook)
    b = model.register_forward_hook(hook)
    x = em.Tensor.ones((1, 3), device=device, dtype=em.float64)
    model(x)
    assert count == [2]
    a.remove()
    a.remove()  # idempotent: b stays
    model(x)
    assert count == [3]
    b.remove()
    model(x)
    assert count == [3]


def test_fork_keeps_hooks_apart(device: em.Device) -> None:
    model, _ = _pair(device)
    count = [0]
    handle = model.register_forward_hook(lambda m, a, o: count.__setitem__(0, count[0] + 1))
    copy = model.fork(device.autodiff())
    handle.remove()
    x = em.Tensor.ones((1, 3), device=device, dtype=em.float64)
    model(x)
    copy(x)
    assert count == [1]  # the copy runs its own list of the hooks


def test_hook_must_be_callable(device: em.Device) -> None:
    model, _ = _pair(device)
    with pytest.raises(em.DTypeError, match="register_forward_hook: expected a callable"):
        model.register_forward_hook(3)  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match="register_forward_pre_hook: expected a callable"):
        model.register_forward_pre_hook(None)  # type: ignore[arg-type]
