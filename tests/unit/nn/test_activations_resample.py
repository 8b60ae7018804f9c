"""The activation, padding, resizing and pixel-shuffle functions and layers against PyTorch in
float64, forward and backward, on both backends; their argument errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")
TF = torch.nn.functional
F = em.nn.functional

# values that hit every kink and branch: 0, the hardswish knees at -3 and 3, large and small
# PyTorch's hardsigmoid multiplies by 1/6 rounded to float32 even in float64 (a relative error of
# 3e-8); ember uses 1/6 in the input's precision
TOL = {"hardsigmoid": 1e-7, "Hardsigmoid": 1e-7}
KINKS = np.array([-30.0, -4.0, -3.0, -1.5, -0.0, 0.0, 0.3, 2.9, 3.0, 3.5, 25.0])

ACTIVATIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    "elu": (lambda x: F.elu(x, 1.3), lambda x: TF.elu(x, 1.3)),
    "softplus": (F.softplus, TF.softplus),
    "softplus_beta": (lambda x: F.softplus(x, 2.0, 5.0), lambda x: TF.softplus(x, 2.0, 5.0)),
    "mish": (F.mish, TF.mish),
    "hardswish": (F.hardswish, TF.hardswish),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
}

LAYERS = {
    "LeakyReLU": (em.nn.LeakyReLU(0.1), torch.nn.LeakyReLU(0.1)),
    "ELU": (em.nn.ELU(), torch.nn.ELU()),
    "Softplus": (em.nn.Softplus(beta=0.5), torch.nn.Softplus(beta=0.5)),
    "Mish": (em.nn.Mish(), torch.nn.Mish()),
    "Hardswish": (em.nn.Hardswish(), torch.nn.Hardswish()),
    "Hardsigmoid": (em.nn.Hardsigmoid(), torch.nn.Hardsigmoid()),
}

RESAMPLE: dict[str, tuple[tuple[int, ...], Callable[..., Any], Callable[..., Any]]] = {
    "pad_constant": (
        (2, 3, 4, 5),
        lambda x: F.pad(x, (1, 2, 0, 3), value=0.5),
        lambda x: TF.pad(x, (1, 2, 0, 3), value=0.5),
    ),
    "pad_crop": (
        (2, 3, 4, 5),
        lambda x: F.pad(x, (-1, 2, 1, -2)),
        lambda x: TF.pad(x, (-1, 2, 1, -2)),
    ),
    "pad_reflect": (
        (2, 3, 4, 5),
        lambda x: F.pad(x, (3, 4, 1, 2), mode="reflect"),
        lambda x: TF.pad(x, (3, 4, 1, 2), mode="reflect"),
    ),
    "pad_replicate": (
        (2, 3, 4, 5),
        lambda x: F.pad(x, (6, 1, 2, 0), mode="replicate"),
        lambda x: TF.pad(x, (6, 1, 2, 0), mode="replicate"),
    ),
    "pad_circular": (
        (2, 3, 4, 5),
        lambda x: F.pad(x, (5, 2, 4, 1), mode="circular"),
        lambda x: TF.pad(x, (5, 2, 4, 1), mode="circular"),
    ),
    "pad_1d_reflect": (
        (2, 3, 6),
        lambda x: F.pad(x, (2, 5), mode="reflect"),
        lambda x: TF.pad(x, (2, 5), mode="reflect"),
    ),
    "nearest_size": (
        (2, 3, 4, 5),
        lambda x: F.interpolate(x, size=(7, 3)),
        lambda x: TF.interpolate(x, size=(7, 3)),
    ),
    "nearest_scale": (
        (2, 3, 4, 5),
        lambda x: F.interpolate(x, scale_factor=1.6),
        lambda x: TF.interpolate(x, scale_factor=1.6),
    ),
    "nearest_1d": (
        (2, 3, 5),
        lambda x: F.interpolate(x, scale_factor=3),
        lambda x: TF.interpolate(x, scale_factor=3),
    ),
    "nearest_3d": (
        (1, 2, 3, 4, 2),
        lambda x: F.interpolate(x, size=(5, 2, 3)),
        lambda x: TF.interpolate(x, size=(5, 2, 3)),
    ),
    "bilinear": (
        (2, 3, 4, 5),
        lambda x: F.interpolate(x, size=(9, 7), mode="bilinear"),
        lambda x: TF.interpolate(x, size=(9, 7), mode="bilinear"),
    ),
    "bilinear_down": (
        (2, 3, 8, 9),
        lambda x: F.interpolate(x, scale_factor=0.45, mode="bilinear"),
        lambda x: TF.interpolate(x, scale_factor=0.45, mode="bilinear"),
    ),
    "bilinear_align": (
        (2, 3, 4, 5),
        lambda x: F.interpolate(x, size=(6, 1), mode="bilinear", align_corners=True),
        lambda x: TF.interpolate(x, size=(6, 1), mode="bilinear", align_corners=True),
    ),
    "linear_1d": (
        (2, 3, 5),
        lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"),
        lambda x: TF.interpolate(x, scale_factor=2.5, mode="linear"),
    ),
    "pixel_shuffle": (
        (2, 12, 3, 4),
        lambda x: F.pixel_shuffle(x, 2),
        lambda x: TF.pixel_shuffle(x, 2),
    ),
    "pixel_shuffle_batched": (
        (2, 2, 9, 2, 3),
        lambda x: F.pixel_shuffle(x, 3),
        lambda x: TF.pixel_shuffle(x, 3),
    ),
    "pixel_unshuffle": (
        (2, 3, 4, 6),
        lambda x: F.pixel_unshuffle(x, 2),
        lambda x: TF.pixel_unshuffle(x, 2),
    ),
    "Upsample": (
        (1, 2, 3, 3),
        em.nn.Upsample(scale_factor=2, mode="bilinear"),
        torch.nn.Upsample(scale_factor=2, mode="bilinear"),
    ),
    "PixelShuffle": ((1, 8, 2, 2), em.nn.PixelShuffle(2), torch.nn.PixelShuffle(2)),
}


def _check(
    device: em.Device,
    x: np.ndarray,
    ours: Callable[..., Any],
    theirs: Callable[..., Any],
    seed: int,
    tol: float = 1e-12,
) -> None:
    t = torch.tensor(x, requires_grad=True)
    want = theirs(t)
    g = np.random.default_rng(seed).standard_normal(tuple(want.shape))
    (want * torch.tensor(g)).sum().backward()
    e = em.Tensor.from_data(x, device=device.autodiff(), dtype=em.float64).require_grad()
    got = ours(e)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.to_numpy(), want.detach().numpy(), rtol=tol, atol=tol)
    grads = (got * em.Tensor.from_data(g, device=device, dtype=em.float64)).sum().backward()
    np.testing.assert_allclose(e.grad(grads).to_numpy(), t.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_matches_torch(device: em.Device, name: str) -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([KINKS, rng.uniform(-6.0, 6.0, 30)])
    _check(device, x, *ACTIVATIONS[name], seed=8, tol=TOL.get(name, 1e-12))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_activation_layer_matches_torch(device: em.Device, name: str) -> None:
    x = np.random.default_rng(3).uniform(-5.0, 5.0, (4, 6))
    _check(device, x, *LAYERS[name], seed=4, tol=TOL.get(name, 1e-12))


@pytest.mark.parametrize("name", sorted(RESAMPLE))
def test_resample_matches_torch(device: em.Device, name: str) -> None:
    shape, ours, theirs = RESAMPLE[name]
    x = np.random.default_rng(11).standard_normal(shape)
    _check(device, x, ours, theirs, seed=12)


def test_float32_follows_torch_within_float32_rounding(device: em.Device) -> None:
    x = np.random.default_rng(5).uniform(-6.0, 6.0, (64,)).astype(np.float32)
    for name, (ours, theirs) in ACTIVATIONS.items():
        got = ours(em.Tensor.from_data(x, device=device)).to_numpy()
        assert got.dtype == np.float32, name
        np.testing.assert_allclose(got, theirs(torch.tensor(x)).numpy(), rtol=2e-6, atol=2e-6)


def test_pad_of_int_tensor_keeps_its_dtype(device: em.Device) -> None:
    x = em.Tensor.from_data([[1, 2, 3]], device=device)
    out = F.pad(x, (1, 1), value=7)
    assert out.dtype == em.int64 and out.tolist() == [[7, 1, 2, 3, 7]]
    assert F.pad(x, (2, 0), mode="reflect").tolist() == [[3, 2, 1, 2, 3]]


@pytest.mark.parametrize(
    ("call", "error", "fragment"),
    [
        (lambda x: F.pad(x, (1,)), em.ShapeError, "even number of widths"),
        (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1)), em.ShapeError, "at most 2 per dim"),
        (lambda x: F.pad(x, (3, 0), mode="reflect"), em.ShapeError, "widths <= 2"),
        (lambda x: F.pad(x, (-1, 0), mode="replicate"), em.ShapeError, "widths >= 0"),
        (lambda x: F.pad(x, (1, 1), mode="wrap"), em.ShapeError, "expected mode"),
        (lambda x: F.pad(x, (1.5, 1)), em.DTypeError, "tuple of ints"),
        (lambda x: F.pad(x, (-2, -2)), em.ShapeError, "leaves nothing"),
        (lambda x: F.interpolate(x, size=4), em.ShapeError, "(N, C, *spatial)"),
        (lambda x: F.interpolate(x.reshape((1, 1, 3))), em.ShapeError, "exactly one of"),
        (
            lambda x: F.interpolate(x.reshape((1, 1, 3)), size=4, mode="cubic"),
            em.ShapeError,
            "expected mode",
        ),
        (
            lambda x: F.interpolate(x.reshape((1, 1, 3)), size=4, align_corners=True),
            em.ShapeError,
            "linear modes only",
        ),
        (
            lambda x: F.interpolate(x.reshape((1, 1, 3)), scale_factor=-1.0),
            em.ShapeError,
            "positive scale factors",
        ),
        (
            lambda x: F.pixel_shuffle(x.reshape((1, 3, 1, 1)), 2),
            em.ShapeError,
            "divide by upscale_factor**2",
        ),
        (lambda x: F.pixel_unshuffle(x.reshape((1, 1, 1, 3)), 2), em.ShapeError, "divisible by 2"),
        (lambda x: F.pixel_shuffle(x.reshape((3, 1, 1)), 0), em.DTypeError, "positive int"),
        (lambda x: F.softplus(x, beta=0.0), em.ShapeError, "beta > 0"),
        (lambda x: F.leaky_relu(x, float("nan")), em.DTypeError, "finite number"),
        (lambda x: F.elu(x.int()), em.DTypeError, "float tensor"),
    ],
)
def test_bad_arguments_raise_clear_errors(call: Any, error: type, fragment: str) -> None:
    x = em.tensor([[1.0, 2.0, 3.0]])
    with pytest.raises(error, match=__import__("re").escape(fragment)):
        call(x)


def test_layers_have_no_parameters_and_print_their_options() -> None:
    assert em.nn.LeakyReLU(0.3).num_params() == 0
    assert repr(em.nn.Softplus(beta=2.0)) == "Softplus(beta=2.0, threshold=20.0)"
    assert repr(em.nn.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
