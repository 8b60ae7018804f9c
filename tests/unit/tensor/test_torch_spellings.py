"""PyTorch spellings (issue 18): argmax/argmin, max/min(dim), var/std, and a table of the others
(sum/mean/amax/amin/prod/norm with dims, view/reshape/permute/transpose/squeeze, where, einsum,
//, %, random creation, Module.eval/apply).

Each case runs ember and PyTorch on the same seeded input and compares values, shapes and
dtypes; the Burn ``_dim`` forms keep their reduced dim.
"""

# ruff: noqa: E501  (the call tables keep one case per line)
from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember._core.spellings import SpellingsMethods

DIMS = [None, 0, 1, -1]
DTYPES = {
    "float32": (em.float32, torch.float32),
    "float64": (em.float64, torch.float64),
    "int64": (em.int64, torch.int64),
}


def _data(dtype_name: str, shape: tuple[int, ...] = (4, 5)) -> np.ndarray:
    rng = np.random.default_rng(18)
    if dtype_name == "int64":
        return rng.integers(-3, 4, size=shape)  # small range: ties, first index must win
    return rng.normal(size=shape)


def _pair(device: em.Device, a: np.ndarray, dtype_name: str) -> tuple[em.Tensor, torch.Tensor]:
    edt, tdt = DTYPES[dtype_name]
    return em.Tensor.from_data(a, device=device, dtype=edt), torch.tensor(a, dtype=tdt)


def _same(got: em.Tensor, want: torch.Tensor, rtol: float = 0.0) -> None:
    assert got.shape == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.to_numpy(), want.numpy(), rtol=rtol)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremum_matches_torch(
    device: em.Device, op: str, dim: int | None, keepdim: bool, dtype_name: str
) -> None:
    x, t = _pair(device, _data(dtype_name), dtype_name)
    _same(getattr(x, op)(dim, keepdim=keepdim), getattr(t, op)(dim, keepdim=keepdim))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremum_defaults_and_zero_d(device: em.Device, op: str) -> None:
    x, t = _pair(device, _data("float32", (2, 3, 4)), "float32")
    _same(getattr(x, op)(), getattr(t, op)())  # flattened index, 0-d
    _same(getattr(x, op)(1), getattr(t, op)(1))
    s, ts = _pair(device, np.array(2.5), "float32")
    for dim in (None, 0, -1):
        _same(getattr(s, op)(dim), getattr(ts, op)(dim))
    with pytest.raises(em.ShapeError, match=rf"^{op}: .*expected a non-empty tensor"):
        getattr(em.Tensor.zeros((0, 3), device=device), op)()
    with pytest.raises(em.DTypeError, match=rf"^{op}: keepdim must be a bool"):
        getattr(x, op)(0, 1)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_dim_gives_values_and_indices(
    device: em.Device, op: str, dim: int, keepdim: bool, dtype_name: str
) -> None:
    x, t = _pair(device, _data(dtype_name), dtype_name)
    got, want = getattr(x, op)(dim, keepdim=keepdim), getattr(t, op)(dim, keepdim=keepdim)
    values, indices = got  # unpacks like torch.return_types.max
    _same(values, want.values)
    _same(indices, want.indices)
    _same(got.values, want.values)
    _same(got.indices, want.indices)


def test_max_without_dim_and_burn_forms_keep_their_behaviour(device: em.Device) -> None:
    a = _data("float32", (3, 4))
    x, t = _pair(device, a, "float32")
    _same(x.max(), t.max())
    _same(x.min(), t.min())
    _same(x.max_dim(1), t.amax(1, keepdim=True))
    _same(x.min_dim(0), t.amin(0, keepdim=True))
    _same(x.sum_dim(1), t.sum(1, keepdim=True), rtol=1e-6)
    _same(x.mean_dim(0), t.mean(0, keepdim=True), rtol=1e-6)


def test_max_dim_gradient_goes_to_the_first_maximum(device: em.Device) -> None:
    a = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64).require_grad()
    t = torch.tensor(a, requires_grad=True)
    values, _ = x.max(1)
    grads = (values * em.tensor([2.0, 5.0], device=device, dtype=em.float64)).sum().backward()
    tv, _ = t.max(1)
    (tv * torch.tensor([2.0, 5.0], dtype=torch.float64)).sum().backward()
    g = x.grad(grads)
    assert g is not None and t.grad is not None
    np.testing.assert_array_equal(g.to_numpy(), t.grad.numpy())


VAR_DIMS = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("correction", [1, 0])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", VAR_DIMS)
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_var_std_match_torch(
    device: em.Device,
    dtype_name: str,
    op: str,
    dim: int | tuple[int, ...] | None,
    keepdim: bool,
    correction: int,
) -> None:
    x, t = _pair(device, _data(dtype_name, (3, 4, 5)), dtype_name)
    rtol = 1e-5 if dtype_name == "float32" else 1e-12  # a two-pass sum over <= 60 elements
    got = getattr(x, op)(dim, keepdim, correction=correction)
    _same(got, getattr(t, op)(dim, keepdim=keepdim, correction=correction), rtol=rtol)


def test_var_gradient_over_several_dims_matches_torch(device: em.Device) -> None:
    a = _data("float64", (3, 4, 5))
    x = em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64).require_grad()
    t = torch.tensor(a, requires_grad=True)
    w = np.arange(1.0, 5.0)
    grads = (x.std((0, 2)) * em.Tensor.from_data(w, device=device)).sum().backward()
    (t.std((0, 2)) * torch.tensor(w)).sum().backward()
    g = x.grad(grads)
    assert g is not None and t.grad is not None
    np.testing.assert_allclose(g.to_numpy(), t.grad.numpy(), rtol=1e-10)


def test_var_rejects_the_old_positional_correction(device: em.Device) -> None:
    x = em.tensor([[1.0, 2.0, 4.0]], device=device)
    with pytest.raises(em.DTypeError, match=r"^var: keepdim must be a bool, got 0"):
        x.var(1, 0)


def test_accuracy_line_matches_torch(device: em.Device) -> None:
    # the shape pattern: 4 rows of logits, (4,) int labels, 3 of 4 right
    logits = np.array([[2.0, 0.1, 0.3], [0.2, 1.5, 0.1], [0.3, 0.2, 0.9], [1.0, 2.0, 0.5]])
    y = np.array([0, 1, 2, 0])
    el = em.Tensor.from_data(logits, device=device, dtype=em.float32)
    ey = em.Tensor.from_data(y, device=device, dtype=em.int64)
    acc = (el.argmax(1) == ey).float().mean()
    want = (torch.tensor(logits).argmax(1) == torch.tensor(y)).float().mean()
    assert acc.shape == () and acc.item() == want.item() == 0.75


# ---------------------------------------------------------------- the other spellings (issue 18)
# (name, ember call, torch call, input shapes, differentiable): each runs on the same seeded
# float64 inputs; values, shapes and dtypes must agree, and gradients of (out * w).sum().
SPELLINGS: list[tuple[str, Any, Any, list[tuple[int, ...]], bool]] = [
    ("sum()", lambda x: x.sum(), lambda x: x.sum(), [(3, 4)], True),
    ("sum(1)", lambda x: x.sum(1), lambda x: x.sum(1), [(3, 4)], True),
    ("sum(-1, keepdim)", lambda x: x.sum(-1, keepdim=True), lambda x: x.sum(-1, keepdim=True), [(2, 3, 4)], True),
    ("sum((0, 2))", lambda x: x.sum((0, 2)), lambda x: x.sum((0, 2)), [(2, 3, 4)], True),
    ("sum((2, 0), keepdim)", lambda x: x.sum((2, 0), keepdim=True), lambda x: x.sum((2, 0), keepdim=True), [(2, 3, 4)], True),
    ("sum 0-d", lambda x: x.sum(0), lambda x: x.sum(0), [()], True),
    ("mean(0)", lambda x: x.mean(0), lambda x: x.mean(0), [(3, 4)], True),
    ("mean((1, 2))", lambda x: x.mean((1, 2)), lambda x: x.mean((1, 2)), [(2, 3, 4)], True),
    ("mean(None, keepdim)", lambda x: x.mean(None, True), lambda x: x.mean((0, 1), keepdim=True), [(3, 4)], True),
    ("amax(1)", lambda x: x.amax(1), lambda x: x.amax(1), [(3, 4)], True),
    ("amax((0, 1), keepdim)", lambda x: x.amax((0, 1), keepdim=True), lambda x: x.amax((0, 1), keepdim=True), [(2, 3, 4)], True),
    ("amin()", lambda x: x.amin(), lambda x: x.amin(), [(3, 4)], True),
    ("amin(-1)", lambda x: x.amin(-1), lambda x: x.amin(-1), [(2, 3, 4)], True),
    ("prod()", lambda x: x.prod(), lambda x: x.prod(), [(3, 4)], True),
    ("prod(1, keepdim)", lambda x: x.prod(1, keepdim=True), lambda x: x.prod(1, keepdim=True), [(3, 4)], True),
    ("norm()", lambda x: x.norm(), lambda x: x.norm(), [(3, 4)], True),
    ("norm(dim=1)", lambda x: x.norm(dim=1), lambda x: x.norm(dim=1), [(3, 4)], True),
    ("norm(1, (0, 1))", lambda x: x.norm(1, (0, 1)), lambda x: x.norm(1, (0, 1)), [(2, 3, 4)], True),
    ("norm(inf, -1)", lambda x: x.norm(math.inf, -1), lambda x: x.norm(math.inf, -1), [(3, 4)], True),
    ("norm(3, 0, keepdim)", lambda x: x.norm(3, 0, True), lambda x: x.norm(3, 0, True), [(3, 4)], True),
    ("view(4, -1)", lambda x: x.view(4, -1), lambda x: x.view(4, -1), [(2, 3, 4)], True),
    ("reshape(-1)", lambda x: x.reshape(-1), lambda x: x.reshape(-1), [(2, 3, 4)], True),
    ("reshape(3, 8)", lambda x: x.reshape(3, 8), lambda x: x.reshape(3, 8), [(2, 3, 4)], True),
    ("reshape((6, 4))", lambda x: x.reshape((6, 4)), lambda x: x.reshape((6, 4)), [(2, 3, 4)], True),
    ("permute(2, 0, 1)", lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1), [(2, 3, 4)], True),
    ("permute((1, 0, 2))", lambda x: x.permute((1, 0, 2)), lambda x: x.permute((1, 0, 2)), [(2, 3, 4)], True),
    ("transpose(0, 2)", lambda x: x.transpose(0, 2), lambda x: x.transpose(0, 2), [(2, 3, 4)], True),
    ("transpose()", lambda x: x.transpose(), lambda x: x.transpose(-2, -1), [(2, 3, 4)], True),
    ("unsqueeze(1)", lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(1), [(3, 4)], True),
    ("unsqueeze(-1)", lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(-1), [(3, 4)], True),
    ("squeeze()", lambda x: x.squeeze(), lambda x: x.squeeze(), [(1, 3, 1, 4)], True),
    ("squeeze(2)", lambda x: x.squeeze(2), lambda x: x.squeeze(2), [(1, 3, 1, 4)], True),
    ("squeeze(1) of size 3", lambda x: x.squeeze(1), lambda x: x.squeeze(1), [(1, 3, 1, 4)], True),
    ("squeeze((0, 2))", lambda x: x.squeeze((0, 2)), lambda x: x.squeeze((0, 2)), [(1, 3, 1, 4)], True),
    (".T", lambda x: x.T, lambda x: x.T, [(3, 4)], True),
    (".T 1-d", lambda x: x.T, lambda x: x, [(4,)], True),  # unchanged (torch: the same, warning)
    (".mT", lambda x: x.mT, lambda x: x.mT, [(2, 3, 4)], True),
    ("clone", lambda x: x.clone() * 2.0, lambda x: x.clone() * 2.0, [(3, 4)], True),
    ("where(cond, a, b)", lambda x, y: em.Tensor.where(x > 0, x, y), lambda x, y: torch.where(x > 0, x, y), [(3, 4), (4,)], True),
    ("where(cond, a, 0.0)", lambda x: em.Tensor.where(x > 0, x, 0.0), lambda x: torch.where(x > 0, x, 0.0), [(3, 4)], True),
    ("x.where(cond, y)", lambda x, y: x.where(y > 0, y), lambda x, y: x.where(y > 0, y), [(3, 4), (3, 4)], True),
    ("masked_fill", lambda x: x.masked_fill(x < 0, -1.5), lambda x: x.masked_fill(x < 0, -1.5), [(3, 4)], True),
    ("masked_fill tensor", lambda x, v: x.masked_fill(x < 0, v), lambda x, v: x.masked_fill(x < 0, v), [(3, 4), ()], True),
    ("einsum matmul", lambda a, b: em.Tensor.einsum("ij,jk->ik", a, b), lambda a, b: torch.einsum("ij,jk->ik", a, b), [(3, 4), (4, 5)], True),
    ("einsum batched", lambda a, b: em.Tensor.einsum("bij,bkj->bik", a, b), lambda a, b: torch.einsum("bij,bkj->bik", a, b), [(2, 3, 4), (2, 5, 4)], True),
    ("einsum implicit", lambda a, b: em.Tensor.einsum("ij,kj", a, b), lambda a, b: torch.einsum("ij,kj", a, b), [(3, 4), (5, 4)], True),
    ("einsum trace", lambda a: em.Tensor.einsum("ii", a), lambda a: torch.einsum("ii", a), [(4, 4)], True),
    ("einsum diagonal", lambda a: em.Tensor.einsum("ii->i", a), lambda a: torch.einsum("ii->i", a), [(4, 4)], True),
    ("einsum outer", lambda a, b: em.Tensor.einsum("i,j->ij", a, b), lambda a, b: torch.einsum("i,j->ij", a, b), [(3,), (4,)], True),
    ("einsum sum", lambda a: em.Tensor.einsum("ijk->j", a), lambda a: torch.einsum("ijk->j", a), [(2, 3, 4)], True),
    ("einsum ellipsis", lambda a, b: em.Tensor.einsum("...ij,...jk->...ik", a, b), lambda a, b: torch.einsum("...ij,...jk->...ik", a, b), [(2, 3, 4), (4, 5)], True),
    ("einsum three", lambda a, b, c: em.Tensor.einsum("ij,jk,kl->il", a, b, c), lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c), [(2, 3), (3, 4), (4, 5)], True),
    ("einsum attention", lambda q, k: em.Tensor.einsum("bhqd,bhkd->bhqk", q, k), lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), [(2, 2, 3, 4), (2, 2, 5, 4)], True),
    ("einsum list", lambda a, b: em.Tensor.einsum("ij,j->i", [a, b]), lambda a, b: torch.einsum("ij,j->i", [a, b]), [(3, 4), (4,)], True),
    ("x // y", lambda x, y: x // y, lambda x, y: x // y, [(3, 4), (4,)], False),
    ("x % y", lambda x, y: x % y, lambda x, y: x % y, [(3, 4), (4,)], True),
    ("x // 0.7", lambda x: x // 0.7, lambda x: x // 0.7, [(3, 4)], False),
    ("x % -0.7", lambda x: x % -0.7, lambda x: x % -0.7, [(3, 4)], True),
    ("2.5 // x", lambda x: 2.5 // x, lambda x: 2.5 // x, [(3, 4)], False),
    ("2.5 % x", lambda x: 2.5 % x, lambda x: 2.5 % x, [(3, 4)], False),  # torch: no derivative
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "ours", "theirs", "shapes", "diff"), SPELLINGS, ids=[s[0] for s in SPELLINGS]
)
def test_spelling_matches_torch(
    device: em.Device, name: str, ours: Any, theirs: Any, shapes: list[Any], diff: bool
) -> None:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = [rng.normal(size=s) for s in shapes]
    xs = [em.Tensor.from_data(a, device=device.autodiff(), dtype=em.float64) for a in arrays]
    xs = [x.require_grad() for x in xs] if diff else xs
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=diff) for a in arrays]
    out, want = ours(*xs), theirs(*ts)
    _same(out, want.detach(), rtol=1e-12)
    if not diff:
        return
    w = rng.normal(size=out.shape)
    grads = (out * em.Tensor.from_data(w, device=device, dtype=em.float64)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        g = x.grad(grads)
        expect = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
        assert g is not None, name
        np.testing.assert_allclose(g.to_numpy(), expect, rtol=1e-10, atol=1e-12, err_msg=name)


INT_CASES: list[tuple[str, Any, Any]] = [
    ("int // int", lambda x, y: x // y, lambda x, y: x // y),
    ("int % int", lambda x, y: x % y, lambda x, y: x % y),
    ("int // 3", lambda x, y: x // 3, lambda x, y: x // 3),
    ("int % -3", lambda x, y: x % -3, lambda x, y: x % -3),
    ("int // 2.5", lambda x, y: x // 2.5, lambda x, y: x // 2.5),
    ("7 // int", lambda x, y: 7 // y, lambda x, y: 7 // y),
    ("bool sum", lambda x, y: (x > 0).sum(), lambda x, y: (x > 0).sum()),
    ("bool sum(0)", lambda x, y: (x > 0).sum(0), lambda x, y: (x > 0).sum(0)),
    ("int sum(1)", lambda x, y: x.sum(1), lambda x, y: x.sum(1)),
    ("int amax(0)", lambda x, y: x.amax(0), lambda x, y: x.amax(0)),
    ("int prod(1)", lambda x, y: y.prod(1), lambda x, y: y.prod(1)),
    ("int prod()", lambda x, y: y.prod(), lambda x, y: y.prod()),
    ("int where", lambda x, y: em.Tensor.where(x > 0, x, 0), lambda x, y: torch.where(x > 0, x, 0)),
    ("int masked_fill", lambda x, y: x.masked_fill(x < 0, 9), lambda x, y: x.masked_fill(x < 0, 9)),
    ("int einsum", lambda x, y: em.Tensor.einsum("ij,ij->i", x, y), lambda x, y: torch.einsum("ij,ij->i", x, y)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "ours", "theirs"), INT_CASES, ids=[c[0] for c in INT_CASES])
def test_int_spellings_match_torch(device: em.Device, name: str, ours: Any, theirs: Any) -> None:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    a = rng.integers(-9, 10, size=(3, 4))
    b = rng.integers(1, 5, size=(3, 4)) * rng.choice([-1, 1], size=(3, 4))  # no zero
    x, y = (em.Tensor.from_data(v, device=device) for v in (a, b))
    _same(ours(x, y), theirs(torch.tensor(a), torch.tensor(b)))


def test_sum_without_arguments_takes_the_row_directly(device: em.Device) -> None:
    x = em.Tensor.ones((2, 3), device=device)
    assert type(x).sum is SpellingsMethods.sum and x.sum().item() == 6.0
    assert x.reshape((3, 2)).shape == x.reshape(3, 2).shape == x.view(-1, 2).shape == (3, 2)
    assert x.sum_dim(1).shape == (2, 1) and x.unsqueeze_dim(0).shape == (1, 2, 3)  # Burn forms


def test_size_numel_and_random_creation(device: em.Device) -> None:
    x = em.Tensor.zeros((2, 3, 4), device=device)
    assert x.size() == (2, 3, 4) and x.size(-1) == 4 and x.numel() == 24
    em.seed(3)
    a = em.Tensor.randn(2, 3, device=device)
    em.seed(3)
    b = em.Tensor.randn((2, 3), device=device)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())  # seeded, both spellings
    u = em.Tensor.rand(1000, device=device, dtype=em.float64)
    assert u.dtype is em.float64 and 0.0 <= u.amin().item() and u.amax().item() < 1.0
    r = em.Tensor.randint(-2, 3, (1000,), device=device)
    assert r.dtype is em.int64 and set(np.unique(r.to_numpy())) == {-2, -1, 0, 1, 2}
    assert em.Tensor.randint(4, (5,), device=device).amax().item() < 4
    like = em.Tensor.randn_like(x.float().autodiff())
    assert like.shape == x.shape and like.is_autodiff() and not like.is_tracked()
    assert em.Tensor.rand_like(x).shape == (2, 3, 4)
    g = em.Generator(5)
    one = em.Tensor.randn(4, device=device, generator=g).to_numpy()
    g.manual_seed(5)
    np.testing.assert_array_equal(em.Tensor.randn(4, device=device, generator=g).to_numpy(), one)


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda x: x.sum(3), em.ShapeError, r"^sum: dim 3 is out of range"),
        (lambda x: x.sum(0, 1), em.DTypeError, r"^sum: keepdim must be a bool"),
        (lambda x: x.mean((0, 0)), em.ShapeError, r"^mean: dims \(0, 0\) repeat an axis"),
        (lambda x: x.transpose(0), em.DTypeError, r"^transpose: expected two dims"),
        (lambda x: x.reshape(5, 5), em.ShapeError, r"^reshape"),
        (lambda x: x.norm("nuc"), em.DTypeError, r"^norm: expected p"),
        (lambda x: x.int().norm(), em.DTypeError, r"^norm: expected a float tensor"),
        (
            lambda x: x.int() // (x.int() * 0),
            em.ShapeError,
            r"^floor_divide: integer division by zero",
        ),
        (lambda x: x.int() % 0, em.ShapeError, r"^remainder: integer division by zero"),
        (lambda x: em.Tensor.where(x, x, x), em.DTypeError, r"^where: expected a bool condition"),
        (lambda x: x.masked_fill(x > 0, x), em.ShapeError, r"^masked_fill: expected a number"),
        (lambda x: em.Tensor.einsum("ij,jk", x), em.ShapeError, r"^einsum: 2 operand terms for 1"),
        (lambda x: em.Tensor.einsum("ijk", x), em.ShapeError, r"^einsum: term 'ijk' has 3 labels"),
        (lambda x: em.Tensor.einsum("ij->k", x), em.ShapeError, r"^einsum: output label 'k'"),
        (
            lambda x: em.Tensor.einsum("ij,ij", x, x.T),
            em.ShapeError,
            r"^einsum: label 'i' has sizes",
        ),
        (lambda x: em.Tensor.einsum(x, x), em.DTypeError, r"^einsum: expected the equation"),
        (lambda x: x.reshape(-1).mT, em.ShapeError, r"^mT: expected a matrix"),
        (lambda x: em.Tensor.randint(3, 3, (2,)), em.ShapeError, r"^randint: expected low < high"),
        (lambda x: em.Tensor.zeros((0, 3)).amax(0), em.ShapeError, r"^amax: expected a non-empty"),
    ],
)
def test_spelling_errors_are_clear(call: Any, error: type, pattern: str) -> None:
    x = em.Tensor.from_data(np.arange(6.0).reshape(2, 3) - 2.5)
    with pytest.raises(error, match=pattern):
        call(x)


def test_module_eval_and_apply() -> None:
    model = em.nn.Sequential(em.nn.Linear(2, 3), em.nn.ReLU(), em.nn.Linear(3, 1))
    assert model.eval() is model and not model.training
    assert not any(p.val().is_autodiff() for p in model.parameters())
    model.train()
    seen: list[str] = []
    assert model.apply(lambda m: seen.append(type(m).__name__)) is model
    assert seen == ["Linear", "ReLU", "Linear", "Sequential"]  # children first, as PyTorch
    with pytest.raises(em.DTypeError, match=r"^Module.apply: expected a callable"):
        model.apply(3)  # type: ignore[arg-type]
