"""The row <-> backend seam for fused backwards (``OpSpec.fused_backward``).

A fused row's backward is written once, in the row; a backend may supply a fused kernel in its
place. Held here: the kernel and the row's rule agree within the dtype's tolerance wherever a
backend supplies one; which backend supplies which kernel is a deliberate, pinned list (a NumPy
kernel only where it measured faster than the rule), so no math path is written per backend; the
choice is made once per backend class and a kernel may decline inputs to the rule.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from helpers.rules import kernel_grads, rule_grads
from helpers.tolerance import attention_tolerance, tolerance

import ember as em
from ember.backend.families.fused import FusedBackwards
from ember.backend.numpy.backend import NumpyBackend
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")
from ember.backend.torch.backend import TorchBackend  # noqa: E402

FUSED = sorted(n for n, s in OPS.items() if s.fused_backward is not None)
_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
PLACES = ["numpy", "torch:cpu", pytest.param("torch:cuda:0", marks=[pytest.mark.cuda, _CUDA])]

# who supplies which fused kernel, and why; a change here is a decision, not an accident
SUPPLIED = {
    # row-blocked on the kernel pool: 1.5-1.8x the generic rule at (1024, 512) float32
    # (bench/fused_backward.py); batch norm's (issue 20) sums channels as row dot products and
    # makes 3 full-size arrays, not ~10: about half the rule's time on (32, 16, 32, 32) float32;
    # layer norm's takes its row sums as dot products per row: forward + backward 800 -> 540 us
    # at GPT's (16, 64, 128); attention's runs one batch share per pool thread: 0.8-0.9x the
    # rule at GPT's (16, 4, 64, 32)
    NumpyBackend: {
        "softmax_backward",
        "log_softmax_backward",
        "batch_norm_backward",
        "layer_norm_backward",
        "attention_backward",
    },
    # ATen's kernels: _softmax_backward_data, native_layer_norm / batch_norm_backward, and the
    # cuDNN / flash / memory-efficient attention backwards (the math path is the row's rule)
    TorchBackend: {
        "softmax_backward",
        "log_softmax_backward",
        "layer_norm_backward",
        "batch_norm_backward",
        "attention_backward",
    },
}


def _backend(place: str) -> Any:
    if place == "numpy":
        return em.Device.cpu().b
    return em.Device.torch(place.partition(":")[2]).b


def _extra_attention(rng: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """4-d, no bias or mask: the inputs torch's fused kernels take (flash_cpu on the CPU)."""
    n = rng.normal
    none = np.asarray(0.0)
    q, k, v = n(size=(2, 3, 8, 8)), n(size=(2, 3, 8, 8)), n(size=(2, 3, 8, 8))
    return [((q, k, v, none, none), {"scale": 0.35, "is_causal": c}) for c in (False, True)]


def _cases(name: str, rng: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    examples = OPS[name].examples
    assert examples is not None
    cases = list(examples(rng))
    return cases + _extra_attention(rng) if name == "attention" else cases


def _tol(name: str, inputs: tuple[Any, ...], attrs: dict[str, Any], dtype: Any) -> dict[str, float]:
    x = inputs[0]
    if name == "attention":
        return attention_tolerance(dtype, inputs[1].shape[-2], x.shape[-1], backward=True)
    if name in ("softmax", "log_softmax"):
        reduced = x.shape[attrs["dim"]]
    elif name == "batch_norm":
        reduced = x.size // x.shape[1]
    else:
        reduced = int(np.prod(x.shape[x.ndim - attrs["normalized_ndim"] :]))
    # the statistics (two sums of `reduced` terms) and the projection (one more) on each side
    return tolerance(dtype, 4.0 * (reduced + 2), scale=4.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", FUSED)
def test_a_supplied_kernel_agrees_with_the_row_rule(
    name: str, place: str, dtype: Any, node_seed: int
) -> None:
    b = _backend(place)
    rng = np.random.default_rng(node_seed)
    ran = 0
    for arrays, attrs in _cases(name, rng):
        inputs = tuple(b.from_numpy(np.asarray(a, dtype=dtype)) for a in arrays)
        out = b.table[name](*inputs, **attrs)
        grad = b.from_numpy(rng.normal(size=tuple(out.shape)).astype(dtype))
        want = rule_grads(b, name, inputs, attrs, grad)
        got = kernel_grads(b, name, inputs, attrs, grad)
        assert len(want) == len(inputs) and all(w is not None for w in want), name
        if got is None:
            continue  # no kernel, or it declined these inputs: the rule is what runs
        ran += 1
        tol = _tol(name, arrays, attrs, dtype)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g is not None, (name, i)
            assert b.dtype_of(g) is b.dtype_of(w), (name, i)
            np.testing.assert_allclose(
                b.to_numpy(g), b.to_numpy(w), **tol, err_msg=f"{name} input {i} on {place}"
            )
    supplied = OPS[name].fused_backward in type(b).fused_backwards
    if name == "attention" and place == "torch:cuda:0" and dtype is np.float64:
        supplied = False  # no fused CUDA attention kernel takes float64: the exact rule runs
    assert (ran > 0) == supplied, (name, place, ran)  # a supplied kernel takes some case


def test_every_declared_kernel_is_named_by_a_row_and_back() -> None:
    named = {OPS[n].fused_backward for n in FUSED}
    declared = {n for n, v in vars(FusedBackwards).items() if callable(v) and n[0] != "_"}
    assert named == declared - {"fused_backwards"}


@pytest.mark.parametrize("cls", list(SUPPLIED), ids=lambda c: c.__name__)
def test_which_backend_supplies_which_kernel_is_pinned(cls: type) -> None:
    assert set(cls.fused_backwards) == SUPPLIED[cls]  # type: ignore[attr-defined]


def test_no_backend_keeps_a_backward_for_a_rule_written_in_the_row() -> None:
    # rms_norm's rule is the row's only; neither backend has a kernel of that math
    for cls in SUPPLIED:
        assert not hasattr(cls, "rms_norm_backward"), cls.__name__
    assert OPS["rms_norm"].fused_backward is None


def test_torch_attention_kernel_declines_what_only_the_math_path_takes() -> None:
    b = em.Device.torch("cpu").b
    rng = np.random.default_rng(0)
    q, k, v, g = (b.from_numpy(rng.normal(size=(1, 2, 4, 8))) for _ in range(4))
    bias = b.from_numpy(rng.normal(size=(4, 4)))
    none = b.from_numpy(np.asarray(0.0))
    assert b.attention_backward(g, q, k, v, bias, none, 0.5, False) is NotImplemented
    assert b.attention_backward(g, q, k, v, none, none, 0.5, False) is not NotImplemented


class _Counting(NumpyBackend):
    """A backend whose class supplies an attention kernel that declines every input."""

    calls: ClassVar[list[str]] = []

    @staticmethod
    def attention_backward(  # type: ignore[override]
        grad: Any, q: Any, k: Any, v: Any, bias: Any, keep: Any, scale: float, is_causal: bool
    ) -> Any:
        _Counting.calls.append("attention")
        return NotImplemented


def test_the_kernel_is_chosen_per_class_and_may_decline() -> None:
    assert "attention_backward" in _Counting.fused_backwards
    b = _Counting("cpu")
    rng = np.random.default_rng(1)
    (arrays, attrs) = _extra_attention(rng)[0]
    grad = rng.normal(size=arrays[0].shape)

    class Ctx:
        pass

    ctx = Ctx()
    ctx.b, ctx.inputs, ctx.attrs = b, arrays, attrs  # type: ignore[attr-defined]
    ctx.output, ctx.parents = None, (1, 1, 1, None, None)  # type: ignore[attr-defined]
    got = OPS["attention"].backward(ctx, grad)  # type: ignore[misc]
    assert _Counting.calls == ["attention"]  # asked, declined: the row's rule ran
    want = OPS["attention"].rule(ctx, grad)  # type: ignore[misc]
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_array_equal(g, w)
    assert got[3] is None and got[4] is None  # the placeholders need no gradient here


def test_a_fused_kernel_must_be_static() -> None:
    with pytest.raises(TypeError, match="staticmethod"):

        class _Bound(NumpyBackend):
            def layer_norm_backward(  # type: ignore[override]
                self, grad: Any, x: Any, weight: Any, bias: Any, normalized_ndim: int, eps: float
            ) -> Any:
                return NotImplemented
