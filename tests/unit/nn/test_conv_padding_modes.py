"""nn.Conv2d / nn.Conv1d ``padding="same" | "valid" | int | pair`` against torch's layers loaded
with the same state_dict: values and input / parameter gradients in float64, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")

CASES: list[tuple[tuple[int, ...], dict[str, Any]]] = [
    ((3, 3), {"padding": "same"}),
    ((2, 2), {"padding": "same"}),
    ((2, 3), {"padding": "same", "dilation": (3, 2)}),
    ((3, 2), {"padding": "valid"}),
    ((3, 3), {"padding": 2, "stride": 2}),
    ((3, 3), {"padding": (1, 0), "groups": 2}),
    ((4, 4), {"padding": "same", "groups": 2, "bias": False}),
]


@pytest.mark.parametrize(("kernel", "kw"), CASES)
def test_conv2d_padding_matches_torch(
    kernel: tuple[int, int], kw: dict[str, Any], device: em.Device, node_seed: int
) -> None:
    rng = np.random.default_rng(node_seed)
    ours = nn.Conv2d(4, 6, kernel, device=device, dtype=em.float64, **kw)
    ref = torch.nn.Conv2d(4, 6, kernel, dtype=torch.float64, **kw)
    assert ours.padding == (kw["padding"] if isinstance(kw["padding"], str) else ref.padding)
    state = {k: torch.tensor(v.to_numpy()) for k, v in ours.state_dict().items()}
    ref.load_state_dict(state)
    x = rng.normal(size=(2, 4, 7, 6))
    ad = device.autodiff()
    ours_ad = nn.Conv2d(4, 6, kernel, device=ad, dtype=em.float64, **kw)
    ours_ad.load_state_dict(ours.state_dict())
    xe = em.tensor(x, device=ad, dtype=em.float64).require_grad()
    xt = torch.tensor(x, requires_grad=True)
    ye, yt = ours_ad(xe), ref(xt)
    assert ye.shape == tuple(yt.shape)
    np.testing.assert_allclose(ye.to_numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = rng.normal(size=tuple(yt.shape))
    grads = (ye * em.tensor(w, device=device, dtype=em.float64)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    gx = xe.grad(grads)
    assert gx is not None and xt.grad is not None
    np.testing.assert_allclose(gx.to_numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
    for name, p in ours_ad.named_parameters():
        g = p.val().grad(grads)
        tg = dict(ref.named_parameters())[name].grad
        assert g is not None and tg is not None
        np.testing.assert_allclose(g.to_numpy(), tg.numpy(), rtol=1e-9, atol=1e-11)


def test_conv1d_padding_same_matches_torch(device: em.Device, node_seed: int) -> None:
    rng = np.random.default_rng(node_seed)
    ours = nn.Conv1d(3, 5, 4, padding="same", device=device, dtype=em.float64)
    ref = torch.nn.Conv1d(3, 5, 4, padding="same", dtype=torch.float64)
    ref.load_state_dict({k: torch.tensor(v.to_numpy()) for k, v in ours.state_dict().items()})
    x = rng.normal(size=(2, 3, 9))
    y = ours(em.tensor(x, device=device, dtype=em.float64))
    want = ref(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10, atol=1e-12)


def test_bad_padding_is_refused() -> None:
    with pytest.raises(em.ShapeError, match="Conv2d: padding='same' needs stride 1"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(em.ShapeError, match="Conv2d: expected padding 'same', 'valid'"):
        nn.Conv2d(2, 2, 3, padding="full")
    with pytest.raises(em.ShapeError, match="ConvTranspose2d: expected padding an int"):
        nn.ConvTranspose2d(2, 2, 3, padding="same")  # type: ignore[arg-type]
