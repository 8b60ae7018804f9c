"""Every name API.md promises exists, with its spelling; ``dir(em)`` is exactly the public names
and no function shadows a subpackage; fixes found by the API.md audit."""

from __future__ import annotations

import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import ember as em

T = em.Tensor
F = em.nn.functional

# ---------------------------------------------------------------- the names on ``em.``
# Every name API.md puts on ``em.`` whose feature exists today.
API_NAMES = (
    "Device default_device Tensor tensor Distribution seed Generator get_rng_state set_rng_state "
    "GradientCheckpointingStrategy "
    "Gradients float32 float64 float16 bfloat16 int32 int64 bool EmberError AutodiffError "
    "ShapeError DTypeError DeviceError CaptureError capture nn optim train amp autodiff "
    "QuantScheme quantization int8"
).split()
# Public today though API.md does not name them (README: em.data.DataLoader, em.checkpoint.report;
# tests annotate dtypes as em.DType). Reported: API.md is to list them, or they leave __all__.
NOT_IN_API_MD = ["data", "checkpoint", "DType"]
PUBLIC = sorted(API_NAMES + NOT_IN_API_MD)
# API.md names of features not built yet; each joins API_NAMES when its issue lands:
# QuantScheme, quantization and int8 (#16). (em.autodiff.grad / vjp / hvp (#17) and
# em.autodiff.Function (#19) live inside em.autodiff.)
NOT_BUILT: list[str] = []
SUBPACKAGES = ["amp", "autodiff", "checkpoint", "data", "nn", "optim", "quantization", "train"]
# Modules that ``import ember`` binds as attributes of the package besides SUBPACKAGES (the import
# system does so for every submodule it loads): internal, hidden from dir(em) and __all__, and to
# be ``_``-prefixed like the tensor core (ember/_core/) when they are next moved.
INTERNAL_BOUND = ["backend", "dtype", "errors", "ops"]
REPO = Path(__file__).resolve().parents[3]


def test_dir_is_exactly_the_public_names() -> None:
    assert sorted(n for n in dir(em) if not n.startswith("_")) == PUBLIC
    assert sorted(em.__all__) == PUBLIC and len(set(em.__all__)) == len(em.__all__)
    namespace: dict[str, Any] = {}
    exec("from ember import *", namespace)
    assert sorted(set(namespace) - {"__builtins__"}) == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_top_level_name(name: str) -> None:
    assert hasattr(em, name), f"em.{name} is public (API.md, README)"


@pytest.mark.parametrize("name", NOT_BUILT)
def test_unbuilt_names_are_absent_not_stubbed(name: str) -> None:
    assert not hasattr(em, name), f"em.{name} exists: move it from NOT_BUILT to API_NAMES"


def test_public_subpackages_are_the_ember_modules() -> None:
    modules = sorted(n for n in PUBLIC if isinstance(getattr(em, n), ModuleType))
    assert modules == SUBPACKAGES
    for name in SUBPACKAGES:
        assert getattr(em, name) is sys.modules[f"ember.{name}"]


def test_no_public_function_shadows_a_subpackage() -> None:
    # loading more of ember (the command line, models, records) rebinds no public name
    import ember.cli.main
    import ember.models
    import ember.record  # noqa: F401

    submodules = {m.name for m in pkgutil.iter_modules(em.__path__)}
    shadows = {n for n in PUBLIC if n in submodules and not isinstance(getattr(em, n), ModuleType)}
    assert shadows == set()
    assert "_core" in submodules and "tensor" not in submodules
    assert callable(em.tensor) and not isinstance(em.tensor, ModuleType)


def test_the_tensor_core_imports_every_way() -> None:
    import ember._core.device as by_attribute
    from ember._core import device
    from ember._core.device import Device

    assert by_attribute is device is sys.modules["ember._core.device"] and Device is em.Device
    assert em.tensor([1.0, 2.0]).tolist() == [1.0, 2.0]


def test_import_ember_binds_only_known_modules() -> None:
    code = (
        "import types, ember; print(sorted(k for k, v in vars(ember).items() "
        "if not k.startswith('_') and isinstance(v, types.ModuleType)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    ).stdout
    assert out.strip() == str(sorted(SUBPACKAGES + INTERNAL_BOUND))


TENSOR_METHODS = (
    "zeros ones empty full zeros_like ones_like full_like from_data arange random cat stack "
    "shape ndim dtype device to_numpy item tolist is_autodiff is_tracked is_require_grad "
    "gradient_checkpointing_strategy autodiff without_autodiff inner require_grad "
    "set_require_grad detach with_gradient_checkpointing_strategy to_device backward grad "
    "grad_remove grad_replace abs equal not_equal greater greater_equal lower lower_equal "
    "equal_elem not_equal_elem greater_elem greater_equal_elem lower_elem lower_equal_elem "
    "add sub mul div add_scalar sub_scalar mul_scalar div_scalar neg exp log log1p sqrt sin "
    "cos tanh erf recip powf powf_scalar powi_scalar clamp sign floor ceil round sum sum_dim "
    "mean mean_dim max max_dim min_dim argmax argmin var prod cumsum matmul reshape transpose "
    "swap_dims permute flatten unsqueeze_dim squeeze_dim expand repeat_dim flip slice "
    "slice_assign narrow chunk split select gather scatter mask_where mask_fill tril triu "
    "one_hot float int bool cast sort argsort topk"
).split()

FUNCTIONAL = (
    "relu gelu silu sigmoid tanh softmax log_softmax dropout linear conv1d conv2d max_pool2d "
    "avg_pool2d embedding layer_norm rms_norm scaled_dot_product_attention cross_entropy "
    "mse_loss binary_cross_entropy binary_cross_entropy_with_logits"
).split()

# PyTorch's positional parameter order for the functional ops whose signature API.md spells out
SIGNATURES = {
    "gelu": ["x", "approximate"],
    "softmax": ["x", "dim"],
    "log_softmax": ["x", "dim"],
    "dropout": ["x", "p", "training"],
    "linear": ["x", "weight", "bias"],
    "conv1d": ["x", "weight", "bias", "stride", "padding", "dilation", "groups"],
    "conv2d": ["x", "weight", "bias", "stride", "padding", "dilation", "groups"],
    "max_pool2d": ["x", "kernel_size", "stride", "padding"],
    "avg_pool2d": ["x", "kernel_size", "stride", "padding"],
    "embedding": ["indices", "weight"],
    "layer_norm": ["x", "normalized_shape", "weight", "bias", "eps"],
    "scaled_dot_product_attention": ["q", "k", "v", "attn_mask", "dropout_p", "is_causal"],
}

MODULE_METHODS = (
    "parameters named_parameters num_params devices train valid no_grad freeze unfreeze "
    "set_require_grad fork to_device state_dict load_state_dict save load"
).split()

OPTIM = "SGD Adam AdamW RMSProp AdaGrad GradientsParams GradientsAccumulator".split()
SCHEDULERS = "Constant Linear CosineAnnealing Exponential Step Noam Composed".split()


@pytest.mark.parametrize("name", TENSOR_METHODS)
def test_tensor_method(name: str) -> None:
    assert hasattr(T, name), f"Tensor.{name} is promised by API.md"


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_name(name: str) -> None:
    assert callable(getattr(F, name, None)), f"em.nn.functional.{name} is promised by API.md"


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_functional_positional_order(name: str) -> None:
    params = list(inspect.signature(getattr(F, name)).parameters)
    assert params[: len(SIGNATURES[name])] == SIGNATURES[name]


def test_module_optim_and_schedulers() -> None:
    for name in MODULE_METHODS:
        assert callable(getattr(em.nn.Module, name, None)), name
    for name in OPTIM:
        assert hasattr(em.optim, name), name
    for name in SCHEDULERS:
        assert hasattr(em.optim.lr, name), name
    for name in ("from_grads", "get", "remove", "register", "to_device", "__len__"):
        assert hasattr(em.optim.GradientsParams, name), name
    for name in ("accumulate", "grads"):
        assert hasattr(em.optim.GradientsAccumulator, name), name
    assert {s.name for s in em.GradientCheckpointingStrategy} >= {"Balanced", "Disabled"}
    assert hasattr(em.train, "Learner") and hasattr(em.nn, "Param") and hasattr(em.nn, "ParamId")


# ---------------------------------------------------------------- comparison family
@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("equal_elem", [False, True, False]),
        ("not_equal_elem", [True, False, True]),
        ("greater_elem", [False, False, True]),
        ("greater_equal_elem", [False, True, True]),
        ("lower_elem", [True, False, False]),
        ("lower_equal_elem", [True, True, False]),
    ],
)
def test_elem_comparisons(device: em.Device, method: str, expected: list[bool]) -> None:
    x = T.from_data([1.0, 2.0, 3.0], device=device.autodiff()).require_grad()
    out = getattr(x, method)(2.0)
    assert out.dtype == em.bool and out.tolist() == expected
    assert out.is_autodiff() and not out.is_tracked()


# ---------------------------------------------------------------- slice spellings
def test_slice_accepts_a_bare_slice_like_slice_assign(device: em.Device) -> None:
    x = T.from_data(np.arange(6.0).reshape(3, 2), device=device)
    assert x.slice(slice(1, None)).tolist() == x[1:].tolist()
    assert x.slice((slice(0, 2), slice(1, None))).tolist() == x[0:2, 1:].tolist()


BAD_RANGES: dict[str, Any] = {
    "None": [None],
    "list": [[0, 1]],
    "bool": [True],
    "str": ["a"],
}


@pytest.mark.parametrize("op", ["slice", "slice_assign"])
@pytest.mark.parametrize("case", sorted(BAD_RANGES))
def test_slice_rejects_non_ranges(device: em.Device, op: str, case: str) -> None:
    x = T.from_data(np.arange(6.0).reshape(3, 2), device=device)
    call: Callable[[], Any] = (
        (lambda: x.slice(BAD_RANGES[case]))
        if op == "slice"
        else (lambda: x.slice_assign(BAD_RANGES[case], T.zeros((1,), device=device)))
    )
    with pytest.raises(em.DTypeError, match=rf"^{op}: expected slices or ints"):
        call()


@pytest.mark.parametrize("op", ["slice", "slice_assign"])
def test_slice_rejects_a_non_sequence(device: em.Device, op: str) -> None:
    x = T.from_data(np.arange(6.0).reshape(3, 2), device=device)
    mask = x > 2.0
    with pytest.raises(em.DTypeError, match=rf"^{op}: expected a list of slices"):
        if op == "slice":
            x.slice(mask)  # type: ignore[arg-type]
        else:
            x.slice_assign(3, x)  # type: ignore[arg-type]


# ---------------------------------------------------------------- error messages name the op
def test_conv1d_errors_name_conv1d(device: em.Device) -> None:
    x = T.ones((1, 4, 5), device=device)
    with pytest.raises(em.ShapeError, match=r"^conv1d: channels don't fit groups=1"):
        F.conv1d(x, T.ones((2, 3, 3), device=device))
    with pytest.raises(em.ShapeError, match=r"^conv1d: expected bias of shape \(2,\)"):
        F.conv1d(x, T.ones((2, 4, 3), device=device), T.ones((3,), device=device))
    with pytest.raises(em.ShapeError, match=r"^conv1d: kernel"):
        F.conv1d(T.ones((1, 4, 2), device=device), T.ones((2, 4, 3), device=device))
    with pytest.raises(em.ShapeError, match=r"^conv1d: padding='same'"):
        F.conv1d(x, T.ones((2, 4, 3), device=device), padding="same", stride=2)
    with pytest.raises(em.DTypeError, match=r"^conv1d: expected weight of the input's dtype"):
        F.conv1d(x, T.ones((2, 4, 3), device=device, dtype=em.float64))


def test_conv1d_still_matches_conv2d(device: em.Device) -> None:
    rng = np.random.default_rng(0)
    x = T.from_data(rng.standard_normal((2, 4, 9)), device=device)
    w = T.from_data(rng.standard_normal((6, 2, 3)), device=device)
    b = T.from_data(rng.standard_normal(6), device=device)
    out = F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2)
    ref = F.conv2d(x.unsqueeze_dim(2), w.unsqueeze_dim(2), b, (1, 2), (0, 1), (1, 2), 2)
    np.testing.assert_allclose(out.to_numpy(), ref.squeeze_dim(2).to_numpy(), rtol=1e-12)


def test_grad_rejects_a_non_gradients_container(device: em.Device) -> None:
    model = em.nn.Linear(2, 1, device=device.autodiff())
    grads = model(T.ones((1, 2), device=device)).sum().backward()
    by_param = em.optim.GradientsParams.from_grads(grads, model)
    w = model.weight.val()
    with pytest.raises(em.DTypeError, match=r"^grad: expected the Gradients .* grads.get"):
        w.grad(by_param)  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match=r"^grad_remove: expected the Gradients"):
        w.grad_remove({})  # type: ignore[arg-type]
    with pytest.raises(em.DTypeError, match=r"^grad_replace: expected the Gradients"):
        w.grad_replace(None, T.zeros((1, 2), device=device))  # type: ignore[arg-type]


def test_to_device_rejects_a_string_with_an_ember_error(device: em.Device) -> None:
    x = T.ones((2,), device=device)
    with pytest.raises(em.DTypeError, match=r"^to_device: expected an em.Device, got str\. Pass"):
        x.to_device("cpu")  # type: ignore[arg-type]


# ---------------------------------------------------------------- index tensors are operands
def test_plain_tensor_indexed_by_autodiff_mask_gives_autodiff(device: em.Device) -> None:
    w = T.from_data([1.0, -2.0, 3.0], device=device.autodiff()).require_grad()
    p = T.from_data([5.0, 6.0, 7.0], device=device)
    out = p[w > 0.0]  # API.md: autodiff (+) plain -> autodiff; the plain operand a constant
    assert out.tolist() == [5.0, 7.0]
    assert out.is_autodiff() and not out.is_tracked() and not p.is_autodiff()
    balanced = w.with_gradient_checkpointing_strategy(em.GradientCheckpointingStrategy.Balanced)
    assert p[balanced > 0.0].gradient_checkpointing_strategy() is (
        em.GradientCheckpointingStrategy.Balanced
    )
    with pytest.raises(em.AutodiffError, match=r"^index: .*Disabled and Balanced"):
        w[balanced > 0.0]


def test_index_tensor_on_another_device_raises() -> None:
    try:
        other = em.Device.torch("cpu")
    except em.DeviceError as e:
        pytest.skip(f"torch backend unavailable: {e}")
    x = T.from_data([1.0, 2.0, 3.0], device=em.Device.cpu())
    with pytest.raises(em.DeviceError, match=r"^index: operands are on cpu and torch:cpu"):
        x[T.from_data([0, 2], device=other)]
    with pytest.raises(em.DeviceError, match=r"^index: operands are on torch:cpu and cpu"):
        x.to_device(other)[x > 1.0]


# ---------------------------------------------------------------- functional errors name the call
def _other_device() -> em.Device:
    try:
        return em.Device.torch("cpu")
    except em.DeviceError as e:
        pytest.skip(f"torch backend unavailable: {e}")


FUNCTIONAL_DEVICE_CASES: dict[str, Callable[[em.Device, em.Device], Any]] = {
    "linear": lambda d, o: F.linear(T.ones((2, 3), device=o), T.ones((4, 3), device=d)),
    "conv1d": lambda d, o: F.conv1d(T.ones((1, 3, 5), device=d), T.ones((2, 3, 3), device=o)),
    "scaled_dot_product_attention": lambda d, o: F.scaled_dot_product_attention(
        T.ones((1, 2, 3), device=d),
        T.ones((1, 2, 3), device=d),
        T.ones((1, 2, 3), device=d),
        attn_mask=T.ones((2, 2), device=o, dtype=em.bool),
    ),
    "mse_loss": lambda d, o: F.mse_loss(T.ones((2,), device=d), T.ones((2,), device=o)),
    "binary_cross_entropy": lambda d, o: F.binary_cross_entropy(
        T.ones((2,), device=d) / 2.0, T.ones((2,), device=d), T.ones((2,), device=o)
    ),
}


@pytest.mark.parametrize("op", sorted(FUNCTIONAL_DEVICE_CASES))
def test_functional_device_mismatch_names_the_function(op: str) -> None:
    other = _other_device()
    with pytest.raises(em.DeviceError, match=rf"^{op}: operands are on"):
        FUNCTIONAL_DEVICE_CASES[op](em.Device.cpu(), other)


FUNCTIONAL_STRATEGY_CASES: dict[str, Callable[[em.Device, em.Device], Any]] = {
    "linear": lambda a, b: F.linear(T.ones((2, 3), device=b), T.ones((4, 3), device=a)),
    "scaled_dot_product_attention": lambda a, b: F.scaled_dot_product_attention(
        T.ones((1, 2, 3), device=b), T.ones((1, 2, 3), device=a), T.ones((1, 2, 3), device=a)
    ),
    "mse_loss": lambda a, b: F.mse_loss(T.ones((2,), device=b), T.ones((2,), device=a)),
}


@pytest.mark.parametrize("op", sorted(FUNCTIONAL_STRATEGY_CASES))
def test_functional_strategy_mismatch_names_the_function(device: em.Device, op: str) -> None:
    a = device.autodiff()
    with pytest.raises(em.AutodiffError, match=rf"^{op}: .*Balanced and Disabled"):
        FUNCTIONAL_STRATEGY_CASES[op](a, a.gradient_checkpointing())
