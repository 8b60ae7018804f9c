"""The torch cross-entropy forward works over blocks of rows: same bits, bounded scratch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
softmax = pytest.importorskip("ember.backend.torch.kernels.softmax")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_blocked_rows_give_the_same_bits(
    dtype: torch.dtype, eps: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(257, 40, generator=g).to(dtype)
    t = torch.randint(0, 40, (257,), generator=g)
    t[3] = -100
    whole = softmax.cross_entropy(x, t, -100, eps)
    calls = []
    real = torch.log_softmax

    def counting(a: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        calls.append(a.shape[0])
        return real(a, *args, **kwargs)

    monkeypatch.setattr(softmax, "_SCRATCH_ELEMENTS", 40 * 16)
    monkeypatch.setattr(softmax.torch, "log_softmax", counting)
    blocked = softmax.cross_entropy(x, t, -100, eps)
    assert max(calls) == 16 and sum(calls) == 257  # no block holds more than the scratch
    assert len(blocked) == len(whole) == 2  # the per-row loss and the residual logsumexp
    for got, want in zip(blocked, whole):
        assert got.dtype == want.dtype
        assert torch.equal(got, want)
