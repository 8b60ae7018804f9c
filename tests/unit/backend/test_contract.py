"""The backend contract: every backend implements ``Backend`` and declares nothing beyond it."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em
from ember.backend.base import Backend, KernelTable
from ember.backend.numpy.backend import NumpyBackend
from ember.ops.registry import OPS


def _backend_classes() -> list[Any]:
    classes: list[Any] = [NumpyBackend]
    try:
        from ember.backend.torch.backend import TorchBackend
    except ImportError:
        return classes
    return [*classes, TorchBackend]


CLASSES = _backend_classes()
DECLARED = {n for n in dir(Backend) if not n.startswith("_")} | {
    n for n in Backend.__annotations__ if not n.startswith("_")
}
METHODS = sorted(
    n for n in DECLARED if inspect.isfunction(inspect.getattr_static(Backend, n, None))
)


def _own_params(cls: type, name: str) -> list[str] | None:
    """Parameter names (without ``self``) of ``cls.name``, or None for a library kernel
    assigned directly (a ufunc, a torch builtin, ``F.silu``): its names are the library's."""
    raw = inspect.getattr_static(cls, name)
    fn = raw.__func__ if isinstance(raw, staticmethod) else raw
    if not inspect.isfunction(fn) or not fn.__module__.startswith("ember."):
        return None
    names = list(inspect.signature(fn).parameters)
    return names if isinstance(raw, staticmethod) else names[1:]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_backend_subclasses_the_base_and_implements_every_abstract_method(cls: type) -> None:
    assert issubclass(cls, Backend)
    assert not cls.__abstractmethods__, sorted(cls.__abstractmethods__)  # type: ignore[attr-defined]
    b = cls("cpu")
    assert isinstance(b.table, KernelTable) and b.table.backend is b
    assert b.placement == "cpu"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_backend_declares_no_public_member_the_base_lacks(cls: type) -> None:
    extra = sorted(n for n in dir(cls) if not n.startswith("_") and n not in DECLARED)
    assert not extra, f"{cls.__name__} has public members Backend does not declare: {extra}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_overrides_keep_the_base_parameter_names(cls: type) -> None:
    checked = 0
    for name in METHODS:
        want = _own_params(Backend, name)
        got = _own_params(cls, name)
        if got is None:  # a library kernel assigned directly (np.add, torch.exp)
            continue
        assert got == want, f"{cls.__name__}.{name}{tuple(got)}: the base declares {tuple(want)}"
        checked += 1
    assert checked >= 60, checked  # most kernels are Python functions whose names can be read


def test_every_row_kernel_is_a_declared_method() -> None:
    kernels = sorted(n for n, s in OPS.items() if s.forward is None)
    assert len(kernels) > 50
    missing = [n for n in kernels if n not in METHODS]
    assert not missing, f"rows whose backend method Backend does not declare: {missing}"


def test_devices_use_the_backend_own_table() -> None:
    b = em.Device.cpu().b
    assert type(b.table) is KernelTable and b.table.backend is b
    assert b.table["exp"] is b.exp  # a row without its own forward runs the backend method
    x = np.array([1.0, -2.0])
    np.testing.assert_array_equal(b.table["mask_fill"](x, x < 0, value=0.5), [1.0, 0.5])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_rng_state_round_trips_through_json(cls: type) -> None:
    b = cls("cpu")
    b.seed(3)
    state = json.loads(json.dumps(b.rng_state()))
    first = b.to_numpy(b.normal((5,), 0.0, 1.0, em.float64))
    b.uniform((7,), 0.0, 1.0, em.float32)
    b.set_rng_state(state)
    np.testing.assert_array_equal(b.to_numpy(b.normal((5,), 0.0, 1.0, em.float64)), first)


# ---------------------------------------------------------------- optional kernels
def _arrays(seed: int, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


SHAPES = [(3, 4), (5,), ()]
ADAM_ARGS = [  # lr, beta1, beta2, eps, weight_decay, decoupled
    (1e-2, 0.9, 0.999, 1e-8, 0.0, False),
    (3e-3, 0.8, 0.99, 1e-6, 0.1, False),
    (3e-3, 0.8, 0.99, 1e-6, 0.1, True),
]


@pytest.mark.parametrize("args", ADAM_ARGS)
@pytest.mark.parametrize("step", [1, 4])
def test_default_adam_many_matches_adam_update(args: tuple[Any, ...], step: int) -> None:
    b = em.Device.cpu().b
    params, grads = _arrays(0, SHAPES), _arrays(1, SHAPES)
    ms = None if step == 1 else _arrays(2, SHAPES)
    vs = None if step == 1 else [a * a for a in _arrays(3, SHAPES)]
    lr, b1, b2, eps, wd, decoupled = args
    new, m, v = b.adam_many(params, grads, ms, vs, step, lr, b1, b2, eps, wd, decoupled)
    opt = (em.optim.AdamW if decoupled else em.optim.Adam)(betas=(b1, b2), eps=eps, weight_decay=wd)
    for i, p in enumerate(params):
        state: dict[str, Any] = {}
        if ms is not None and vs is not None:
            state = {"step": step - 1, "exp_avg": em.tensor(ms[i]), "exp_avg_sq": em.tensor(vs[i])}
        want, st = opt.update(lr, em.tensor(p), em.tensor(grads[i]), state)
        assert type(new[i]) is np.ndarray and new[i].shape == p.shape
        np.testing.assert_array_equal(new[i], want.to_numpy())
        np.testing.assert_array_equal(m[i], st["exp_avg"].to_numpy())
        np.testing.assert_array_equal(v[i], st["exp_avg_sq"].to_numpy())


def test_default_clip_norm_many_scales_by_the_global_norm() -> None:
    b = em.Device.cpu().b
    grads = _arrays(4, SHAPES)
    total = np.sqrt(sum(float((g * g).sum()) for g in grads))
    for max_norm in (0.5, 1e3):
        new, norm = b.clip_norm_many(grads, max_norm, 1e-6)
        assert type(norm) is np.ndarray and norm.shape == ()
        np.testing.assert_allclose(norm, total, rtol=1e-15)
        factor = min(1.0, max_norm / (total + 1e-6))
        for g, n in zip(grads, new):
            np.testing.assert_allclose(n, g * factor, rtol=1e-15)


def test_default_split_views_are_views_of_the_pieces() -> None:
    b = em.Device.cpu().b
    x = np.arange(24.0).reshape(2, 12)
    pieces = b.split_views(x, [5, 5, 2], 1)
    for got, want in zip(pieces, np.split(x, [5, 10], axis=1)):
        np.testing.assert_array_equal(got, want)
        assert np.shares_memory(got, x)


def _torch_backend() -> Any:
    pytest.importorskip("torch")
    return em.Device.torch("cpu").b


def _on(tb: Any, arrays: list[np.ndarray] | None) -> list[Any] | None:
    return None if arrays is None else [tb.from_numpy(a) for a in arrays]


def _same(fused: list[Any], default: list[Any], tb: Any) -> None:
    # float64 throughout: the kernels differ only in the order of rounding
    for a, b in zip(fused, default):
        np.testing.assert_allclose(tb.to_numpy(a), tb.to_numpy(b), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("args", ADAM_ARGS)
@pytest.mark.parametrize("step", [1, 4])
def test_torch_adam_many_matches_the_default(args: tuple[Any, ...], step: int) -> None:
    tb = _torch_backend()
    params, grads = _arrays(5, SHAPES), _arrays(6, SHAPES)
    ms = None if step == 1 else _arrays(7, SHAPES)
    vs = None if step == 1 else [a * a for a in _arrays(8, SHAPES)]
    run: list[Callable[..., Any]] = [tb.adam_many, lambda *a: Backend.adam_many(tb, *a)]
    outs = [f(_on(tb, params), _on(tb, grads), _on(tb, ms), _on(tb, vs), step, *args) for f in run]
    for fused, default in zip(*outs):
        _same(fused, default, tb)
    # and the NumPy backend's default gives the same values
    np_new, _, _ = em.Device.cpu().b.adam_many(params, grads, ms, vs, step, *args)
    _same(outs[0][0], [tb.from_numpy(a) for a in np_new], tb)


def test_torch_clip_norm_many_matches_the_default() -> None:
    tb = _torch_backend()
    grads = _arrays(9, SHAPES)
    for max_norm in (0.5, 1e3):
        fused, norm = tb.clip_norm_many(_on(tb, grads), max_norm, 1e-6)
        default, norm_d = Backend.clip_norm_many(tb, _on(tb, grads), max_norm, 1e-6)
        _same([*fused, norm], [*default, norm_d], tb)


def test_torch_split_views_match_the_default() -> None:
    tb = _torch_backend()
    x = tb.from_numpy(np.arange(24.0).reshape(12, 2))
    fused = tb.split_views(x, [5, 5, 2], 0)
    default = Backend.split_views(tb, x, [5, 5, 2], 0)
    assert [p.shape for p in fused] == [p.shape for p in default]
    for a, b in zip(fused, default):
        assert a.data_ptr() == b.data_ptr()  # the same views of x
        np.testing.assert_array_equal(tb.to_numpy(a), tb.to_numpy(b))
