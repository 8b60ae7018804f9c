"""The higher-order gradient API (API.md, SEMANTICS.md §13): ``backward(create_graph=True)``,
``em.autodiff.grad``, ``vjp`` and ``hvp``: graph lifetime, what the results are, and errors."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F


def _leaf(values: list[float] | np.ndarray, device: em.Device) -> em.Tensor:
    return em.Tensor.from_data(values, device=device.autodiff(), dtype=em.float64).require_grad()


def test_create_graph_leaves_the_first_graph_unconsumed(device: em.Device) -> None:
    x = _leaf([0.5, -1.0, 2.0], device)
    loss = (x * x * x).sum()
    g = x.grad(loss.backward(create_graph=True))
    assert g is not None and g.is_tracked() and not g.is_require_grad()
    np.testing.assert_allclose(g.to_numpy(), 3 * np.array([0.5, -1.0, 2.0]) ** 2, rtol=1e-12)
    first = x.grad(loss.backward())  # the same graph, first order, still runs
    assert first is not None and not first.is_autodiff()
    np.testing.assert_array_equal(first.to_numpy(), g.to_numpy())
    with pytest.raises(em.AutodiffError, match="already consumed"):
        loss.backward()


def test_recorded_gradients_combine_and_have_their_own_backward(device: em.Device) -> None:
    x = _leaf([1.0, 2.0], device)
    w = _leaf([3.0, -1.0], device)
    grads = (x * x * w).sum().backward(create_graph=True)
    gx, gw = x.grad(grads), w.grad(grads)
    assert gx is not None and gw is not None
    # d/dx = 2 x w, d/dw = x^2; reg = sum(gx^2) + sum(gw): d/dx = 8 x w^2 + 2 x, d/dw = 8 x^2 w
    reg = (gx * gx).sum() + gw.sum()
    second = reg.backward()
    a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    np.testing.assert_allclose(x.grad(second).to_numpy(), 8 * a * b * b + 2 * a, rtol=1e-12)
    np.testing.assert_allclose(w.grad(second).to_numpy(), 8 * a * a * b, rtol=1e-12)


def test_default_backward_is_first_order(device: em.Device) -> None:
    d = device.autodiff()
    assert d.autodiff() is d  # idempotent: higher order comes only from create_graph
    x = _leaf([1.0, 2.0], device)
    g = x.grad((x * x).sum().backward())
    assert g is not None and not g.is_autodiff()


def test_grad_of_intermediates_and_unreached_inputs(device: em.Device) -> None:
    x = _leaf([1.0, -2.0], device)
    other = _leaf([5.0, 5.0], device)
    h = x.exp()
    y = (h * h).sum()
    gh, gx, go, gc = em.autodiff.grad(y, [h, x, other, x.detach().set_require_grad(False)])
    e = np.exp(np.array([1.0, -2.0]))
    np.testing.assert_allclose(gh.to_numpy(), 2 * e, rtol=1e-12)
    np.testing.assert_allclose(gx.to_numpy(), 2 * e * e, rtol=1e-12)
    assert go is None and gc is None
    assert not gh.is_autodiff() and not gx.is_autodiff()
    with pytest.raises(em.AutodiffError, match="already consumed"):
        y.backward()  # create_graph=False consumes the graph, as backward() does


def test_grad_with_several_outputs_and_grad_outputs(device: em.Device) -> None:
    x = _leaf([1.0, 2.0, 3.0], device)
    y1, y2 = x * x, x.sin()
    v1 = em.Tensor.from_data([1.0, 0.0, 2.0], device=device, dtype=em.float64)
    (g,) = em.autodiff.grad([y1, y2], x, grad_outputs=[v1, None])
    a = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(g.to_numpy(), 2 * a * [1.0, 0.0, 2.0] + np.cos(a), rtol=1e-12)


def test_mixed_dtype_rows_differentiate_twice(device: em.Device) -> None:
    x = _leaf([0.5, 1.5], device)
    y = em.Tensor.from_data([2.0, 3.0], device=device.autodiff(), dtype=em.float32).require_grad()
    (gx,) = em.autodiff.grad((x * x * y).sum(), x, create_graph=True)  # a float64 * float32 row
    assert gx.dtype is em.float64
    (gy,) = em.autodiff.grad(gx.sum(), y)
    assert gy.dtype is em.float32
    np.testing.assert_allclose(gy.to_numpy(), 2 * np.array([0.5, 1.5]), rtol=1e-6)


def test_vjp_pullback_runs_any_number_of_times(device: em.Device) -> None:
    x = em.Tensor.from_data([1.0, 2.0], device=device, dtype=em.float64)
    out, pullback = em.autodiff.vjp(lambda a: a * a * a, x)
    v = em.Tensor.from_data([1.0, -1.0], device=device, dtype=em.float64)
    for _ in range(2):
        (g,) = pullback(v)
        np.testing.assert_allclose(g.to_numpy(), [3.0, -12.0], rtol=1e-12)
    (g,) = pullback(v, create_graph=True)
    assert g.is_tracked() and out.is_tracked()
    assert len(g.sum().backward()) == 1  # d/dx sum(3 x^2 v) reaches vjp's own leaf


def test_hvp_checks_and_linear_functions(device: em.Device) -> None:
    x = em.Tensor.from_data([1.0, 2.0], device=device, dtype=em.float64)
    v = em.Tensor.ones((2,), device=device, dtype=em.float64)
    value, hv = em.autodiff.hvp(lambda a: (a * 3.0).sum(), x, v)  # linear: H = 0
    assert value.item() == 9.0 and hv.tolist() == [0.0, 0.0]
    with pytest.raises(em.ShapeError, match="hvp: expected f to return a scalar"):
        em.autodiff.hvp(lambda a: a * a, x, v)
    with pytest.raises(em.ShapeError, match="hvp: expected v"):
        em.autodiff.hvp(lambda a: (a * a).sum(), x, em.Tensor.ones((3,), device=device))


def test_errors_name_what_was_wrong(device: em.Device) -> None:
    plain = em.Tensor.ones((2,), device=device)
    with pytest.raises(em.AutodiffError, match="grad: expected a tracked tensor"):
        em.autodiff.grad(plain.sum(), plain)
    x = _leaf([1.0, 2.0], device)
    with pytest.raises(em.DTypeError, match="grad: expected inputs"):
        em.autodiff.grad((x * x).sum(), "x")  # type: ignore[arg-type]
    with pytest.raises(em.ShapeError, match="grad_outputs"):
        em.autodiff.grad(x * x, x, grad_outputs=em.Tensor.ones((3,), device=device))
    with pytest.raises(em.AutodiffError, match="graph was already consumed"):
        loss = (x * x).sum()
        loss.backward()
        loss.backward(create_graph=True)


def test_conv_and_pool_rows_differentiate_twice(device: em.Device) -> None:
    rng = np.random.default_rng(0)
    img = _leaf(rng.normal(size=(1, 2, 5, 5)), device)
    w = _leaf(rng.normal(size=(3, 2, 3, 3)), device)
    y = F.max_pool2d(F.conv2d(img, w, padding=1).tanh(), 2) + F.avg_pool2d(img.sum_dim(1), 2)
    gi, gw = em.autodiff.grad(y.sum(), [img, w], create_graph=True)
    assert gi is not None and gw is not None and gi.is_tracked() and gw.is_tracked()
    second = ((gi * gi).sum() + (gw * gw).sum()).backward()
    assert img.grad(second) is not None and w.grad(second) is not None


def test_a_row_without_a_recorded_form_is_named(
    device: em.Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.autodiff import higher, rule_backend

    def unrecordable(self: object, *args: object) -> None:
        raise rule_backend.NotRecordable("conv2d_backward")

    monkeypatch.setattr(rule_backend.RuleBackend, "conv2d_backward", unrecordable)
    rng = np.random.default_rng(0)
    img = em.Tensor.from_data(rng.normal(size=(1, 1, 4, 4)), device=device, dtype=em.float64)
    w = _leaf(rng.normal(size=(2, 1, 3, 3)), device)
    loss = F.conv2d(img, w).sum()
    with pytest.raises(em.AutodiffError, match=r"op 'conv2d'.*kernel 'conv2d_backward'"):
        loss.backward(create_graph=True)
    assert w.grad(loss.backward()) is not None  # the failed pass changed nothing

    logits = _leaf(rng.normal(size=(3, 4)), device)
    target = em.Tensor.from_data([0, 3, 1], device=device)
    monkeypatch.setattr(higher, "_RESIDUALS", {})
    with pytest.raises(em.AutodiffError, match=r"op 'cross_entropy'.*residuals"):
        F.cross_entropy(logits, target).backward(create_graph=True)


def _dropped(t: em.Tensor) -> int:
    """How many values of ``t``'s graph a memory budget dropped."""
    seen, stack, count = set(), [t._node], 0
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        count += bool(getattr(n, "dropped", False))
        stack.extend(n.parents)
    return count


def test_second_derivatives_under_a_budget_that_drops_values(device: em.Device) -> None:
    rng = np.random.default_rng(3)
    w = rng.normal(size=(6, 4))
    x = em.Tensor.from_data(rng.normal(size=(7, 4)), device=device, dtype=em.float64)
    results = []
    for d in (device.autodiff(), device.autodiff().gradient_checkpointing(bytes=512)):
        wt = em.Tensor.from_data(w, device=d, dtype=em.float64).require_grad()
        h = F.silu(F.linear(x, wt))
        y = (h * h).tanh().sum()
        if d.gradient_checkpointing_strategy() != em.GradientCheckpointingStrategy.Disabled:
            assert _dropped(y) > 0
        (g,) = em.autodiff.grad(y, wt, create_graph=True)
        (hg,) = em.autodiff.grad((g * g).sum(), wt)
        results.append(hg.to_numpy())
    np.testing.assert_array_equal(results[1], results[0])


def test_moves_between_backends_differentiate_twice() -> None:
    pytest.importorskip("torch")
    x = _leaf([0.5, -1.0], em.Device.cpu())
    y = x.to_device(em.Device.torch("cpu"))
    (g,) = em.autodiff.grad((y * y * y).sum(), x, create_graph=True)
    assert g.device == em.Device.cpu() and g.is_tracked()
    np.testing.assert_allclose(g.to_numpy(), [0.75, 3.0], rtol=1e-12)
    (h,) = em.autodiff.grad(g.sum(), x)
    np.testing.assert_allclose(h.to_numpy(), [3.0, -6.0], rtol=1e-12)


def test_hvp_with_create_graph_differentiates_again(device: em.Device) -> None:
    x = _leaf([0.5, -1.0], device)
    v = em.Tensor.from_data([1.0, 2.0], device=device, dtype=em.float64)
    value, hv = em.autodiff.hvp(lambda a: (a * a * a * a).sum(), x, v, create_graph=True)
    a = np.array([0.5, -1.0])
    # f = sum a^4: H v = 12 a^2 v; d/da sum(H v) = 24 a v
    np.testing.assert_allclose(hv.to_numpy(), 12 * a * a * [1.0, 2.0], rtol=1e-12)
    assert hv.is_tracked() and value.is_tracked()
    (third,) = em.autodiff.grad(hv.sum(), x)
    np.testing.assert_allclose(third.to_numpy(), 24 * a * [1.0, 2.0], rtol=1e-12)


def test_a_long_balanced_chain_differentiates_twice_exactly(device: em.Device) -> None:
    a = np.linspace(-1.0, 1.0, 50)
    results = []
    for d in (device.autodiff(), device.autodiff().gradient_checkpointing()):
        x = em.Tensor.from_data(a, device=d, dtype=em.float64).require_grad()
        y = x
        for _ in range(30):  # memory-bound recipes, recomputed in chain-cut segments
            y = (y.sin() * 1.1).tanh()
        (g,) = em.autodiff.grad(y.sum(), x, create_graph=True)
        (h,) = em.autodiff.grad((g * g).sum(), x)
        results.append((g.to_numpy(), h.to_numpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_equal(got, want)
