"""``em.autodiff.Function`` against ``torch.autograd.Function`` in float64, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

torch = pytest.importorskip("torch")
Strategy = em.GradientCheckpointingStrategy
TOL = {"rtol": 1e-12, "atol": 1e-12}  # float64; the two sides run the same formulas


# ---------------------------------------------------------------------------- ember versions
class StraightThrough(em.autodiff.Function):
    """sign(x) forward, the gradient passed where |x| <= 1 (the clipped STE)."""

    @staticmethod
    def forward(ctx: Any, x: em.Tensor) -> em.Tensor:
        ctx.save(x)
        return x.sign()

    @staticmethod
    def backward(ctx: Any, g: em.Tensor) -> em.Tensor:
        (x,) = ctx.saved
        return g * (x.abs() <= 1.0).float().cast(g.dtype)


class GradientReversal(em.autodiff.Function):
    """Identity forward; backward multiplies the gradient by ``-scale`` (a number argument)."""

    @staticmethod
    def forward(ctx: Any, x: em.Tensor, scale: float) -> em.Tensor:
        ctx.scale = scale
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: em.Tensor) -> tuple[em.Tensor, None]:
        return g * -ctx.scale, None


class FusedSwish(em.autodiff.Function):
    """x * sigmoid(x) with its own backward, saving the input and sigmoid(x)."""

    @staticmethod
    def forward(ctx: Any, x: em.Tensor) -> em.Tensor:
        s = F.sigmoid(x)
        ctx.save(x, s)
        return x * s

    @staticmethod
    def backward(ctx: Any, g: em.Tensor) -> em.Tensor:
        x, s = ctx.saved
        return g * (s + x * s * (1.0 - s))


class MemoryBoundExp(em.autodiff.Function):
    """exp(x) saving its output; declared memory-bound, so Balanced recomputes it."""

    memory_bound = True

    @staticmethod
    def forward(ctx: Any, x: em.Tensor) -> em.Tensor:
        y = x.exp()
        ctx.save(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: em.Tensor) -> em.Tensor:
        (y,) = ctx.saved
        return g * y


class KeptExp(MemoryBoundExp):
    memory_bound = False


class ScaleAndShift(em.autodiff.Function):
    """(x * w, exp(x) + shift): two outputs, a tensor weight and a number."""

    @staticmethod
    def forward(ctx: Any, x: em.Tensor, w: em.Tensor, shift: float) -> tuple[em.Tensor, ...]:
        q = x.exp() + shift
        ctx.shift = shift
        ctx.save(x, w, q)  # an output, so create_graph differentiates through it
        return x * w, q

    @staticmethod
    def backward(ctx: Any, ga: em.Tensor, gb: em.Tensor) -> tuple[Any, ...]:
        x, w, q = ctx.saved
        return ga * w + gb * (q - ctx.shift), ga * x, None


# ---------------------------------------------------------------------------- torch versions
class TorchSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x.sign()

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1.0).to(g.dtype)


class TorchGRL(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any, scale: float) -> Any:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        return g * -ctx.scale, None


class TorchSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        x, s = ctx.saved_tensors
        return g * (s + x * s * (1.0 - s))


# ---------------------------------------------------------------------------- helpers
def _data(seed: int, shape: tuple[int, ...] = (4, 5)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape)


def _leaf(device: em.Device, a: np.ndarray, strategy: Strategy = Strategy.Disabled) -> em.Tensor:
    t = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64)
    return t.with_gradient_checkpointing_strategy(strategy).require_grad()


def _tleaf(a: np.ndarray) -> Any:
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def _close(got: em.Tensor | None, want: Any) -> None:
    assert got is not None
    np.testing.assert_allclose(got.to_numpy(), want.detach().numpy(), **TOL)


def _weights(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed + 1).normal(size=shape)


# ---------------------------------------------------------------------------- against torch
@pytest.mark.parametrize("name", ["ste", "grl", "swish"])
def test_functions_match_torch_autograd_function(
    device: em.Device, node_seed: int, name: str
) -> None:
    a, c = _data(node_seed), _weights(node_seed, (4, 5))
    x, tx = _leaf(device, a), _tleaf(a)
    cw = em.Tensor.from_data(c, device=device, dtype=em.float64)
    if name == "ste":
        y, ty = StraightThrough.apply(x), TorchSTE.apply(tx)
    elif name == "grl":
        y, ty = GradientReversal.apply(x, 0.7), TorchGRL.apply(tx, 0.7)
    else:
        y, ty = FusedSwish.apply(x), TorchSwish.apply(tx)
    loss = (y * cw).sum()
    (ty * torch.tensor(c)).sum().backward()
    _close(y, ty)
    _close(x.grad(loss.backward()), tx.grad)


def test_fused_swish_equals_the_composed_op(device: em.Device, node_seed: int) -> None:
    a = _data(node_seed)
    x = _leaf(device, a)
    fused = x.grad((FusedSwish.apply(x) ** 2.0).sum().backward())
    composed = x.grad(((x * F.sigmoid(x)) ** 2.0).sum().backward())
    assert fused is not None and composed is not None
    np.testing.assert_allclose(fused.to_numpy(), composed.to_numpy(), **TOL)


def test_records_one_node_on_tracked_inputs(device: em.Device) -> None:
    x = _leaf(device, np.array([0.5, -1.0]))
    y = FusedSwish.apply(x)
    assert y.is_tracked() and y._node.parents == (x._node,)
    assert y._node.spec.name.endswith("FusedSwish")
    plain = FusedSwish.apply(em.Tensor.from_data([0.5, -1.0], device=device))
    assert not plain.is_autodiff()
    untracked = FusedSwish.apply(em.Tensor.from_data([0.5], device=device.autodiff()))
    assert untracked.is_autodiff() and not untracked.is_tracked()


def test_tuple_outputs_and_number_arguments(device: em.Device, node_seed: int) -> None:
    a, c = _data(node_seed), _weights(node_seed, (4, 5))
    x, w = _leaf(device, a), _leaf(device, c)
    p, q = ScaleAndShift.apply(x, w, 0.5)
    grads = (p * q).sum().backward()
    tx, tw = _tleaf(a), _tleaf(c)
    tp, tq = tx * tw, tx.exp() + 0.5
    (tp * tq).sum().backward()
    _close(p, tp)
    _close(q, tq)
    _close(x.grad(grads), tx.grad)
    _close(w.grad(grads), tw.grad)
    # one output used: the other's gradient arrives as zeros
    x2, w2 = _leaf(device, a), _leaf(device, c)
    only = ScaleAndShift.apply(x2, w2, 0.5)[1].sum().backward()
    np.testing.assert_allclose(x2.grad(only).to_numpy(), np.exp(a), **TOL)
    np.testing.assert_allclose(w2.grad(only).to_numpy(), np.zeros_like(c))


def test_needs_input_grad(device: em.Device) -> None:
    seen: list[tuple[bool, ...]] = []

    class Probe(em.autodiff.Function):
        @staticmethod
        def forward(ctx: Any, x: em.Tensor, c: em.Tensor, k: int) -> em.Tensor:
            seen.append(ctx.needs_input_grad)
            return x * c * float(k)

        @staticmethod
        def backward(ctx: Any, g: em.Tensor) -> tuple[Any, ...]:
            return g, None, None

    x = _leaf(device, np.ones(3))
    Probe.apply(x, em.Tensor.ones((3,), device=device, dtype=em.float64), 2)
    assert seen == [(True, False, False)]


# ---------------------------------------------------------------------------- checkpointing
def test_kept_under_balanced_memory_bound_recomputed(device: em.Device, node_seed: int) -> None:
    a = _data(node_seed)
    want = _leaf(device, a)
    reference = want.grad((KeptExp.apply(want * 2.0) ** 2.0).sum().backward())
    assert reference is not None
    for cls, recomputed in ((KeptExp, False), (MemoryBoundExp, True)):
        x = _leaf(device, a, Strategy.Balanced)
        y = cls.apply(x * 2.0)
        assert y._node.recipe is recomputed
        grads = (y**2.0).sum().backward()
        assert (y._node.id in grads.recomputed) is recomputed
        if recomputed:
            assert grads.recomputed[y._node.id] == 1
        got = x.grad(grads)
        assert got is not None
        np.testing.assert_array_equal(got.to_numpy(), reference.to_numpy())  # bit for bit


@pytest.mark.parametrize("cls", [FusedSwish, MemoryBoundExp], ids=lambda c: c.__name__)
def test_balanced_equals_disabled(device: em.Device, node_seed: int, cls: type) -> None:
    a = _data(node_seed)
    got = []
    for strategy in (Strategy.Disabled, Strategy.Balanced):
        x = _leaf(device, a, strategy)
        y = cls.apply((x * 0.5).exp())
        g = x.grad(((y * x).tanh()).sum().backward())
        assert g is not None
        got.append(g.to_numpy())
    np.testing.assert_array_equal(got[0], got[1])


# ---------------------------------------------------------------------------- higher order
def test_second_order_through_function_matches_torch(device: em.Device, node_seed: int) -> None:
    a = _data(node_seed, (6,))
    x, tx = _leaf(device, a), _tleaf(a)
    gx = x.grad((FusedSwish.apply(x) ** 2.0).sum().backward(create_graph=True))
    assert gx is not None and gx.is_tracked()
    hx = x.grad((gx * gx).sum().backward())
    (tg,) = torch.autograd.grad((TorchSwish.apply(tx) ** 2.0).sum(), tx, create_graph=True)
    (tg * tg).sum().backward()
    _close(gx, tg)
    _close(hx, tx.grad)


def test_second_order_through_tuple_outputs(device: em.Device, node_seed: int) -> None:
    a, c = _data(node_seed, (5,)), _weights(node_seed, (5,))
    x, w = _leaf(device, a), _leaf(device, c)
    p, q = ScaleAndShift.apply(x, w, 0.25)
    grads = (p * q).sum().backward(create_graph=True)
    gx = x.grad(grads)
    assert gx is not None
    second = gx.sum().backward()
    tx, tw = _tleaf(a), _tleaf(c)
    (tg,) = torch.autograd.grad(((tx * tw) * (tx.exp() + 0.25)).sum(), tx, create_graph=True)
    tg.sum().backward()
    _close(gx, tg)
    _close(x.grad(second), tx.grad)
    _close(w.grad(second), tw.grad)


def test_retain_graph_runs_function_backward_twice(device: em.Device) -> None:
    x = _leaf(device, np.array([0.5, -1.5, 2.0]))
    loss = FusedSwish.apply(x).sum()
    first = x.grad(loss.backward(retain_graph=True))
    second = x.grad(loss.backward())
    assert first is not None and second is not None
    np.testing.assert_array_equal(first.to_numpy(), second.to_numpy())


# ---------------------------------------------------------------------------- bad input
_RESULT: dict[str, Any] = {}


class _Wrong(em.autodiff.Function):
    """x * k whose backward returns what the test put in ``_RESULT``."""

    @staticmethod
    def forward(ctx: Any, x: em.Tensor, k: float) -> em.Tensor:
        return x * k

    @staticmethod
    def backward(ctx: Any, g: em.Tensor) -> Any:
        return _RESULT["fn"](g)


@pytest.mark.parametrize(
    ("result", "error", "words"),
    [
        (lambda g: g, em.AutodiffError, "expected 2 gradient(s)"),
        (lambda g: (g, None, None), em.AutodiffError, "expected 2 gradient(s)"),
        (lambda g: (g.sum(), None), em.ShapeError, "input's shape (3,)"),
        (lambda g: (g.to_numpy(), None), em.DTypeError, "expected an em.Tensor"),
        (lambda g: (g, g), em.AutodiffError, "expected None for argument 1"),
    ],
    ids=["count-short", "count-long", "shape", "type", "number-arg"],
)
def test_backward_result_errors(device: em.Device, result: Any, error: type, words: str) -> None:
    _RESULT["fn"] = result
    x = _leaf(device, np.array([1.0, 2.0, 3.0]))
    loss = _Wrong.apply(x, 2.0).sum()
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")) as info:
        loss.backward()
    assert "_Wrong.backward" in str(info.value)


def test_forward_and_class_errors(device: em.Device) -> None:
    class NotATensor(em.autodiff.Function):
        @staticmethod
        def forward(ctx: Any, x: em.Tensor) -> Any:
            return x.to_numpy()

    x = _leaf(device, np.ones(2))
    with pytest.raises(em.DTypeError, match=r"NotATensor\.forward: expected an em\.Tensor"):
        NotATensor.apply(x)
    with pytest.raises(em.AutodiffError, match="subclass"):
        em.autodiff.Function.apply(x)

    class SavesANumber(em.autodiff.Function):
        @staticmethod
        def forward(ctx: Any, x: em.Tensor) -> em.Tensor:
            ctx.save(x, 2.0)
            return x

    with pytest.raises(em.DTypeError, match=r"ctx\.save: expected em\.Tensor"):
        SavesANumber.apply(x)


def test_operands_on_two_devices_raise(device: em.Device) -> None:
    other = em.Device.torch("cpu") if device == em.Device.cpu() else em.Device.cpu()
    x = _leaf(device, np.ones(2))
    y = em.Tensor.ones((2,), device=other, dtype=em.float64)
    with pytest.raises(em.DeviceError):
        ScaleAndShift.apply(x, y, 0.0)
