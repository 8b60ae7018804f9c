"""``backward()`` and the ``Gradients`` container (API.md autodiff table, SEMANTICS.md §3)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import ember as em

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
Strategy = em.GradientCheckpointingStrategy
_strategy = Strategy.Disabled


@pytest.fixture(autouse=True, params=list(Strategy), ids=lambda s: s.name)
def strategy(request: pytest.FixtureRequest) -> Iterator[Strategy]:
    """Every test here runs under both strategies: ``leaf`` creates its leaves with it."""
    global _strategy
    _strategy = request.param
    yield request.param
    _strategy = Strategy.Disabled


def leaf(device: em.Device, data: np.ndarray = X) -> em.Tensor:
    t = em.Tensor.from_data(data, device=device.autodiff(), dtype=em.float64)
    return t.with_gradient_checkpointing_strategy(_strategy).require_grad()


def grad_of(t: em.Tensor, grads: em.Gradients) -> np.ndarray:
    g = t.grad(grads)
    assert g is not None
    return g.to_numpy()


# ---------------------------------------------------------------- preconditions
def test_backward_on_a_plain_tensor_raises(device: em.Device) -> None:
    t = em.Tensor.ones((2,), device=device).sum()
    with pytest.raises(em.AutodiffError, match=r"backward.*plain.*require_grad"):
        t.backward()


def test_backward_on_an_untracked_autodiff_tensor_raises(device: em.Device) -> None:
    t = em.Tensor.ones((2,), device=device.autodiff()).sum()
    with pytest.raises(em.AutodiffError, match=r"backward.*untracked"):
        t.backward()


# ---------------------------------------------------------------- consumed graphs
def test_second_backward_through_the_same_tensor_raises(device: em.Device) -> None:
    x = leaf(device)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(em.AutodiffError, match="already consumed"):
        loss.backward()
    other = Strategy.Balanced if _strategy is Strategy.Disabled else Strategy.Disabled
    for alias in (loss, loss.to_device(device), loss.with_gradient_checkpointing_strategy(other)):
        with pytest.raises(em.AutodiffError, match="already consumed"):
            alias.backward()
    assert loss.is_tracked()  # still tracked after its graph was consumed


def test_new_loss_on_a_consumed_intermediate_raises(device: em.Device) -> None:
    x = leaf(device)
    y = x.exp()
    y.sum().backward()
    with pytest.raises(em.AutodiffError, match=r"backward: the graph was already consumed"):
        (y * 2.0).sum().backward()


def test_a_rejected_backward_consumes_nothing(device: em.Device) -> None:
    x = leaf(device)
    consumed = x.exp()
    fresh = x.sin() * 3.0  # an unconsumed branch
    consumed.sum().backward()
    with pytest.raises(em.AutodiffError, match="already consumed"):
        (fresh + consumed).sum().backward()
    with pytest.raises(em.AutodiffError, match="already consumed"):
        (consumed + fresh).sum().backward()
    # the failed attempts touched nothing: the fresh branch still runs, with the right values
    np.testing.assert_allclose(grad_of(x, fresh.sum().backward()), 3.0 * np.cos(X))


def test_a_loss_whose_upstream_was_consumed_raises_and_stays_unconsumed(device: em.Device) -> None:
    x = leaf(device)
    a = x.exp()
    b, c = a.sin(), a.cos()  # c's own step is fresh, its parent a's is not after b's backward
    b.sum().backward()
    loss = c.sum()
    with pytest.raises(em.AutodiffError, match=r"already consumed \(op 'exp'"):
        loss.backward()
    assert c._node is not None and not c._node.consumed
    assert loss._node is not None and not loss._node.consumed


def test_backward_from_a_leaf(device: em.Device) -> None:
    x = leaf(device)
    np.testing.assert_array_equal(grad_of(x, x.backward()), np.ones(X.shape))
    np.testing.assert_array_equal(grad_of(x, x.backward()), np.ones(X.shape))  # never consumed


def test_leaves_are_reusable_across_passes(device: em.Device) -> None:
    x = leaf(device)
    w = leaf(device, np.array([[1.0], [2.0], [-1.0]]))
    first = (x @ w).tanh().sum().backward()
    second = (x @ w).tanh().sum().backward()
    for t in (x, w):
        np.testing.assert_array_equal(grad_of(t, first), grad_of(t, second))
    third = (x * 2.0).sum().backward()
    np.testing.assert_array_equal(grad_of(x, third), np.full(X.shape, 2.0))
    assert w.grad(third) is None  # not reached by this pass


# ---------------------------------------------------------------- seeding and fan-in
def test_non_scalar_loss_is_seeded_with_ones(device: em.Device) -> None:
    x = leaf(device)
    g_vec = grad_of(x, (x * x * 3.0).backward())
    g_sum = grad_of(x, (x * x * 3.0).sum().backward())
    np.testing.assert_allclose(g_vec, 6.0 * X)
    np.testing.assert_array_equal(g_vec, g_sum)


def test_fan_in_x_times_x(device: em.Device) -> None:
    x = leaf(device)
    np.testing.assert_allclose(grad_of(x, (x * x).sum().backward()), 2.0 * X)


def test_fan_in_x_plus_x(device: em.Device) -> None:
    x = leaf(device)
    np.testing.assert_array_equal(grad_of(x, (x + x).sum().backward()), np.full(X.shape, 2.0))


def test_fan_in_diamond(device: em.Device) -> None:
    x = leaf(device)
    d = x * 2.0  # shared by two branches
    loss = (d.sin() + d.cos()).sum()
    np.testing.assert_allclose(
        grad_of(x, loss.backward()), 2.0 * (np.cos(2 * X) - np.sin(2 * X)), rtol=1e-12
    )


def test_fan_in_nested_diamond_with_broadcast(device: em.Device) -> None:
    x = leaf(device)
    b = leaf(device, np.array([1.0, -2.0, 0.5]))
    a = x.exp()
    h = a * b + a.tanh() * a  # a reaches the loss three times, b is broadcast over rows
    grads = h.sum().backward()
    ea = np.exp(X)
    th = np.tanh(ea)
    bb = np.array([1.0, -2.0, 0.5])
    expected_x = ea * (bb + th + ea * (1 - th**2))
    np.testing.assert_allclose(grad_of(x, grads), expected_x, rtol=1e-12)
    np.testing.assert_allclose(grad_of(b, grads), ea.sum(0), rtol=1e-12)


# ---------------------------------------------------------------- the Gradients container
def test_gradients_hold_only_retained_leaf_gradients(device: em.Device) -> None:
    x = leaf(device)
    w = leaf(device, np.ones((3, 1)))
    untracked = em.Tensor.from_data(X, device=x.device, dtype=em.float64)  # x's strategy
    h = x @ w
    grads = (h * untracked[:, :1]).sum().backward()
    assert len(grads) == 2
    assert h.grad(grads) is None  # non-leaf: not retained
    assert untracked.grad(grads) is None
    assert em.Tensor.from_data(X, device=device).grad(grads) is None  # plain


def test_grad_is_plain_on_the_leaf_device_and_repeatable(device: em.Device) -> None:
    x = leaf(device)
    grads = (x * x).sum().backward()
    g1, g2 = x.grad(grads), x.grad(grads)
    assert g1 is not None and g2 is not None
    assert not g1.is_autodiff() and g1.device == device and g1.dtype is em.float64
    np.testing.assert_array_equal(g1.to_numpy(), g2.to_numpy())


def test_grad_of_an_absent_leaf_is_none(device: em.Device) -> None:
    x, other = leaf(device), leaf(device)
    grads = (x * 1.0).sum().backward()
    assert other.grad(grads) is None
    assert other.grad_remove(grads) is None
    assert len(grads) == 1


def test_grad_remove_pops(device: em.Device) -> None:
    x = leaf(device)
    grads = (x * 4.0).sum().backward()
    g = x.grad_remove(grads)
    assert g is not None
    np.testing.assert_array_equal(g.to_numpy(), np.full(X.shape, 4.0))
    assert x.grad(grads) is None
    assert x.grad_remove(grads) is None
    assert len(grads) == 0


def test_grad_replace_sets_the_entry(device: em.Device) -> None:
    x = leaf(device)
    grads = (x * 4.0).sum().backward()
    new = em.Tensor.full(X.shape, 7.0, device=device, dtype=em.float64)
    x.grad_replace(grads, new)
    np.testing.assert_array_equal(grad_of(x, grads), np.full(X.shape, 7.0))
    x.grad_remove(grads)
    x.grad_replace(grads, new)  # also inserts an absent entry
    assert len(grads) == 1


def test_grad_replace_errors(device: em.Device) -> None:
    x = leaf(device)
    grads = (x * 4.0).sum().backward()
    plain = em.Tensor.from_data(X, device=device, dtype=em.float64)
    with pytest.raises(em.AutodiffError, match=r"grad_replace.*plain"):
        plain.grad_replace(grads, plain)
    with pytest.raises(em.AutodiffError, match=r"grad_replace.*autodiff.*without_autodiff"):
        x.grad_replace(grads, plain.autodiff())
    with pytest.raises(em.ShapeError, match="grad_replace"):
        x.grad_replace(grads, em.Tensor.zeros((3,), device=device, dtype=em.float64))
    np.testing.assert_array_equal(grad_of(x, grads), np.full(X.shape, 4.0))  # unchanged


def test_gradient_dtype_follows_the_leaf(device: em.Device) -> None:
    x = em.Tensor.ones((3,), device=device.autodiff()).require_grad()  # float32
    grads = (x.cast(em.float64) * 2.0).sum().backward()
    g = x.grad(grads)
    assert g is not None and g.dtype is em.float32
    np.testing.assert_array_equal(g.to_numpy(), np.full(3, 2.0, np.float32))


def test_gradients_of_plain_constants_are_never_computed(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.ops.registry import OPS

    spec = OPS["mul"]
    rule = spec.backward
    assert rule is not None
    seen: list[tuple[object, ...]] = []

    def spy(ctx: object, grad: object) -> tuple[object, ...]:
        out = rule(ctx, grad)
        seen.append((tuple(p is not None for p in ctx.parents), out))  # type: ignore[attr-defined]
        return out

    monkeypatch.setattr(spec, "backward", spy)
    x = leaf(device)
    c = em.Tensor.from_data(X, device=device, dtype=em.float64)
    grads = (c * x).sum().backward()
    assert len(seen) == 1
    needs, out = seen[0]
    assert needs == (False, True)  # the node lists only its tracked parent
    assert out[0] is None and out[1] is not None  # type: ignore[index]
    np.testing.assert_array_equal(grad_of(x, grads), X)


@pytest.mark.parametrize("dtype", [em.float16, em.bfloat16, em.float32, em.float64])
def test_gradient_dtype_is_the_leaf_dtype_through_every_rule_kind(
    device: em.Device, dtype: em.DType
) -> None:
    # rules multiply raw bfloat16 arrays by Python floats and use @, which NumPy (ml_dtypes)
    # computes in float32; the leaf's gradient still comes back in the leaf's dtype
    x = em.Tensor.from_data(X, device=device.autodiff(), dtype=dtype).require_grad()
    w = em.Tensor.from_data(X.T, device=device, dtype=dtype)
    for loss in ((x * 1.5).sum(), x.erf().sum(), (x @ w).sum(), x.tanh().mean()):
        g = x.grad(loss.backward())
        assert g is not None and g.dtype is dtype


def test_saved_values_are_released_after_backward(device: em.Device) -> None:
    x = leaf(device)
    y = x.exp()
    z = y * x
    ny, nz = y._node, z._node
    assert ny is not None and nz is not None
    if _strategy is Strategy.Disabled:  # Balanced keeps recipes: nothing to release
        assert ny.output is not None and nz.inputs is not None
    z.sum().backward()
    assert ny.consumed and nz.consumed
    assert ny.output is None and ny.inputs is None
    assert nz.output is None and nz.inputs is None


def test_gradients_repr_and_len(device: em.Device) -> None:
    x = leaf(device)
    grads = (x * 2.0).sum().backward()
    assert len(grads) == 1
    assert "1" in repr(grads)
