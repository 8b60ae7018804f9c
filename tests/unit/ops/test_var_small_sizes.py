"""``var`` where the reduced size is at most the correction (issue 12, item 6).

PyTorch divides by ``max(n - correction, 0)``: the forward is inf (NaN where every deviation is
0, as for n = 1), and the gradient ``2 (x - mean) / (n - correction)`` is +-inf or NaN for
n == correction and finite for n < correction. ember follows it on both backends, under both
checkpointing strategies, without raising or warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")

Strategy = em.GradientCheckpointingStrategy
CASES = [  # (shape, dim, correction)
    ((3, 1), 1, 1),  # one sample, Bessel's correction: NaN forward and gradient
    ((1, 4), 0, 1),
    ((3, 2), 1, 2),  # n == correction: inf forward, +-inf gradient
    ((3, 2), 1, 3),  # n < correction
    ((2, 3, 1), 2, 4),
    ((3, 0), 1, 1),  # no samples
    ((3, 0), 1, 0),
    ((3, 1), 1, 0),  # n = 1 without correction: 0
    ((3, 4), 1, 1),  # the ordinary case, for reference
]
DTYPES = {
    "float64": (em.float64, torch.float64, 1e-12),
    "float32": (em.float32, torch.float32, 1e-5),
}


def _torch_var(
    x: np.ndarray, dim: int, correction: int, dtype: torch.dtype
) -> tuple[np.ndarray, np.ndarray]:
    t = torch.tensor(x, dtype=dtype, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns for n <= correction
        out = torch.var(t, dim, correction=correction, keepdim=True)
    w = torch.arange(1, out.numel() + 1, dtype=dtype).reshape(out.shape)
    (out * w).sum().backward()
    assert t.grad is not None
    return out.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("strategy", list(Strategy), ids=lambda s: s.name)
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_var_follows_pytorch_when_the_size_is_at_most_the_correction(
    device: em.Device,
    case: tuple[tuple[int, ...], int, int],
    dtype_name: str,
    strategy: Strategy,
) -> None:
    shape, dim, correction = case
    edt, tdt, rtol = DTYPES[dtype_name]
    x = np.random.default_rng(6).normal(size=shape)
    ref, ref_grad = _torch_var(x, dim, correction, tdt)
    ad = device.autodiff()
    t = em.Tensor.from_data(x, device=ad, dtype=edt)
    t = t.with_gradient_checkpointing_strategy(strategy).require_grad()
    out = t.var(dim, keepdim=True, correction=correction)
    n = int(np.prod(out.shape))
    w = em.Tensor.from_data(
        np.arange(1, n + 1, dtype=np.float64).reshape(out.shape), device=device, dtype=edt
    )
    grads = (out * w).sum().backward()  # filterwarnings=error: a NumPy warning would fail here
    g = t.grad(grads)
    assert g is not None
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=rtol)  # NaN == NaN, inf == inf here
    np.testing.assert_allclose(g.to_numpy(), ref_grad, rtol=rtol)
    assert g.dtype is edt
