"""The common-case paths of linear, layer_norm and attention (read off the raw arrays) record
the same graph and give the same values as the fully checked paths, and leave every other case,
errors included, to those checks. Class-index range checks count the rows that are not ignored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F

_rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _own_draws(node_seed: int) -> None:
    """A test's draws follow from its id, not from the tests that ran before it."""
    _rng.bit_generator.state = np.random.default_rng(node_seed).bit_generator.state


def _ops(t: em.Tensor) -> list[tuple[str, dict[str, Any]]]:
    """The recorded ops behind ``t``, depth first, with their attrs."""
    out: list[tuple[str, dict[str, Any]]] = []
    stack = [t._node]
    while stack:
        node = stack.pop()
        if node is None or node.spec is None:
            continue
        out.append((node.spec.name, dict(node.attrs)))
        stack.extend(node.parents)
    return out


def _same(fast: Callable[[], em.Tensor], checked: Callable[[], em.Tensor], *leaves: Any) -> None:
    a, b = fast(), checked()
    assert _ops(a) == _ops(b)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    ga, gb = a.sum().backward(), b.sum().backward()
    for leaf in leaves:
        np.testing.assert_array_equal(leaf.grad(ga).to_numpy(), leaf.grad(gb).to_numpy())


def _leaf(ad: em.Device, *shape: int) -> em.Tensor:
    return em.Tensor.from_data(_rng.normal(size=shape), device=ad, dtype=em.float32).require_grad()


@pytest.mark.parametrize("has_bias", [True, False], ids=["bias", "no_bias"])
def test_linear_fast_path_matches_the_checked_path(device: em.Device, has_bias: bool) -> None:
    ad = device.autodiff()
    x, w, b = _leaf(ad, 2, 3, 4), _leaf(ad, 5, 4), _leaf(ad, 5)
    bias = b if has_bias else None
    _same(lambda: F.linear(x, w, bias), lambda: F._linear_checked(x, w, bias), x, w)


def test_linear_bad_operands_still_raise(device: em.Device) -> None:
    ad = device.autodiff()
    x, w = _leaf(ad, 2, 4), _leaf(ad, 5, 4)
    with pytest.raises(em.ShapeError, match=r"linear: expected bias of shape \(5,\)"):
        F.linear(x, w, _leaf(ad, 4))
    with pytest.raises(em.ShapeError, match="linear: expected weight"):
        F.linear(x, _leaf(ad, 4, 5))
    with pytest.raises(em.DTypeError, match="linear: expected weight to be a float tensor"):
        F.linear(x, em.Tensor.zeros((5, 4), device=ad, dtype=em.int64))


@pytest.mark.parametrize("ns", [4, (4,), (3, 4)], ids=["int", "tuple", "two_dims"])
def test_layer_norm_fast_path_matches_the_checked_path(device: em.Device, ns: Any) -> None:
    ad = device.autodiff()
    shape = (ns,) if isinstance(ns, int) else ns
    x, w, b = _leaf(ad, 2, 3, 4), _leaf(ad, *shape), _leaf(ad, *shape)
    # a list takes the checked path
    _same(lambda: F.layer_norm(x, ns, w, b), lambda: F.layer_norm(x, list(shape), w, b), x, w, b)


def test_layer_norm_bad_affine_still_raises(device: em.Device) -> None:
    ad = device.autodiff()
    x, w = _leaf(ad, 2, 4), _leaf(ad, 4)
    with pytest.raises(em.ShapeError, match=r"layer_norm: expected bias of shape \(4,\)"):
        F.layer_norm(x, 4, w, _leaf(ad, 3))
    with pytest.raises(em.DTypeError, match="layer_norm: expected weight of the input's dtype"):
        F.layer_norm(x, 4, w.cast(em.float64), _leaf(ad, 4))
    with pytest.raises(em.ShapeError, match="layer_norm: expected the input's trailing dims"):
        F.layer_norm(x, 3, _leaf(ad, 3), _leaf(ad, 3))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_fast_path_matches_the_checked_path(device: em.Device, causal: bool) -> None:
    ad = device.autodiff()
    q, k, v = _leaf(ad, 2, 3, 5, 4), _leaf(ad, 2, 3, 6, 4), _leaf(ad, 2, 3, 6, 2)

    def checked() -> em.Tensor:  # a float mask of zeros takes the checked path, same values
        mask = None if causal else em.Tensor.zeros((5, 6), device=device)
        return F.scaled_dot_product_attention(q, k, v, mask, is_causal=causal, scale=0.5)

    a = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.5)
    np.testing.assert_allclose(a.to_numpy(), checked().to_numpy(), rtol=1e-6)
    # broadcast batch dims take the checked path: the same row and attrs
    kb, vb = k[:1], v[:1]
    got = F.scaled_dot_product_attention(q, kb, vb, is_causal=causal)
    assert _ops(got)[0] == _ops(F.scaled_dot_product_attention(q, k, v, is_causal=causal))[0]


def test_attention_operands_of_two_strategies_still_raise(device: em.Device) -> None:
    ad = device.autodiff()
    q = _leaf(ad, 2, 5, 4)
    k = _leaf(ad.gradient_checkpointing(), 2, 5, 4)
    with pytest.raises(em.AutodiffError, match="scaled_dot_product_attention: autodiff operands"):
        F.scaled_dot_product_attention(q, k, k)


@pytest.mark.parametrize("ignore_index", [-100, 0, 2, 9], ids=lambda i: f"ignore{i}")
def test_cross_entropy_mean_counts_rows_not_ignored(device: em.Device, ignore_index: int) -> None:
    logits = em.Tensor.from_data(_rng.normal(size=(6, 4)), device=device)
    labels = np.array([0, 2, 2, 3, 1, 2])
    if ignore_index == -100:
        labels[[0, 3]] = -100
    target = em.Tensor.from_data(labels, device=device)
    got = F.cross_entropy(logits, target, ignore_index=ignore_index).item()
    rows = F.cross_entropy(logits, target, ignore_index=ignore_index, reduction="none").to_numpy()
    keep = labels != ignore_index
    np.testing.assert_allclose(got, rows[keep].sum() / keep.sum(), rtol=1e-12)


def test_class_indices_out_of_range_still_raise(device: em.Device) -> None:
    if device.is_cuda:  # a device-side assert there, which would poison the CUDA context
        pytest.skip("on CUDA the kernels check class indices; reading them back would sync")
    logits = em.Tensor.zeros((3, 4), device=device)
    for bad, msg in (([0, 4, 1], "4"), ([0, -1, -100], "-1"), ([-100, 7, 9], "7")):
        with pytest.raises(em.ShapeError, match=f"cross_entropy: index {msg} is out of range"):
            F.cross_entropy(logits, em.tensor(bad, device=device))
    none = em.tensor([], device=device).int()
    empty = F.cross_entropy(em.Tensor.zeros((0, 4), device=device), none)
    assert np.isnan(empty.item())
