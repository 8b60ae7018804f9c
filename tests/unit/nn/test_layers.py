"""Every layer against its PyTorch counterpart with the same weights (float64): outputs, input
gradients and parameter gradients; PyTorch state dicts load by name; save -> load is bit-exact."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

AD = em.Device.cpu().autodiff()
F64 = {"device": AD, "dtype": em.float64}


@dataclass
class Case:
    name: str
    make: Callable[[], nn.Module]
    make_torch: Callable[[], torch.nn.Module]
    shapes: list[tuple[int, ...]]
    ints: int = 0  # > 0: the first input holds ints in [0, ints)
    kwargs: dict[str, Any] = field(default_factory=dict)
    torch_kwargs: dict[str, Any] = field(default_factory=dict)
    atol: float = 1e-10
    repeat_torch: int = 1  # torch's MultiheadAttention takes the query three times


def _out_list(y: Any) -> list[Any]:
    if isinstance(y, (tuple, list)):
        out = []
        for v in y:
            out.extend(_out_list(v))
        return out
    return [] if y is None else [y]


T = torch.nn
CASES = [
    Case("linear", lambda: nn.Linear(5, 3, **F64), lambda: T.Linear(5, 3), [(4, 5)]),
    Case("linear_nobias", lambda: nn.Linear(5, 3, False, **F64), lambda: T.Linear(5, 3, False),
         [(2, 3, 5)]),
    Case("embedding", lambda: nn.Embedding(10, 4, **F64), lambda: T.Embedding(10, 4), [(3, 5)],
         ints=10),
    Case("conv1d", lambda: nn.Conv1d(3, 4, 3, 2, 1, **F64), lambda: T.Conv1d(3, 4, 3, 2, 1),
         [(2, 3, 9)]),
    Case("conv2d", lambda: nn.Conv2d(3, 4, 3, 2, 1, **F64), lambda: T.Conv2d(3, 4, 3, 2, 1),
         [(2, 3, 7, 6)]),
    Case("conv2d_groups_dilation", lambda: nn.Conv2d(4, 6, (3, 2), 1, (2, 1), 2, 2, **F64),
         lambda: T.Conv2d(4, 6, (3, 2), 1, (2, 1), 2, 2), [(2, 4, 7, 6)]),
    Case("conv_transpose2d", lambda: nn.ConvTranspose2d(4, 3, 3, 2, 1, 1, **F64),
         lambda: T.ConvTranspose2d(4, 3, 3, 2, 1, 1), [(2, 4, 4, 5)]),
    Case("max_pool2d", lambda: nn.MaxPool2d(2), lambda: T.MaxPool2d(2), [(2, 3, 6, 6)]),
    Case("avg_pool2d", lambda: nn.AvgPool2d(3, 2, 1), lambda: T.AvgPool2d(3, 2, 1),
         [(2, 3, 7, 6)]),
    Case("adaptive_avg_pool2d", lambda: nn.AdaptiveAvgPool2d((3, 2)),
         lambda: T.AdaptiveAvgPool2d((3, 2)), [(2, 3, 7, 5)]),
    Case("layer_norm", lambda: nn.LayerNorm(6, **F64), lambda: T.LayerNorm(6), [(3, 4, 6)]),
    Case("rms_norm", lambda: nn.RmsNorm(6, 1e-6, **F64), lambda: T.RMSNorm(6, 1e-6), [(3, 4, 6)]),
    Case("rms_norm_default_eps", lambda: nn.RmsNorm((4, 6), **F64), lambda: T.RMSNorm((4, 6)),
         [(3, 4, 6)]),
    Case("layer_norm_no_affine", lambda: nn.LayerNorm(6, elementwise_affine=False, **F64),
         lambda: T.LayerNorm(6, elementwise_affine=False), [(3, 6)]),
    Case("batch_norm1d", lambda: nn.BatchNorm1d(4, **F64), lambda: T.BatchNorm1d(4), [(8, 4)]),
    Case("batch_norm1d_3d", lambda: nn.BatchNorm1d(4, **F64), lambda: T.BatchNorm1d(4),
         [(3, 4, 5)]),
    Case("batch_norm2d", lambda: nn.BatchNorm2d(3, **F64), lambda: T.BatchNorm2d(3),
         [(4, 3, 5, 5)]),
    Case("group_norm", lambda: nn.GroupNorm(2, 4, **F64), lambda: T.GroupNorm(2, 4),
         [(3, 4, 5, 2)]),
    Case("relu", lambda: nn.ReLU(), lambda: T.ReLU(), [(4, 5)]),
    Case("gelu", lambda: nn.GELU(), lambda: T.GELU(), [(4, 5)]),
    Case("gelu_tanh", lambda: nn.GELU("tanh"), lambda: T.GELU("tanh"), [(4, 5)]),
    Case("silu", lambda: nn.SiLU(), lambda: T.SiLU(), [(4, 5)]),
    Case("sigmoid", lambda: nn.Sigmoid(), lambda: T.Sigmoid(), [(4, 5)]),
    Case("tanh", lambda: nn.Tanh(), lambda: T.Tanh(), [(4, 5)]),
    Case("flatten", lambda: nn.Flatten(), lambda: T.Flatten(), [(2, 3, 4, 5)]),
    Case("flatten_middle", lambda: nn.Flatten(1, 2), lambda: T.Flatten(1, 2), [(2, 3, 4, 5)]),
    Case("identity", lambda: nn.Identity(), lambda: T.Identity(), [(2, 3)]),
    Case("sequential",
         lambda: nn.Sequential(nn.Linear(5, 8, **F64), nn.ReLU(), nn.Linear(8, 2, **F64)),
         lambda: T.Sequential(T.Linear(5, 8), T.ReLU(), T.Linear(8, 2)), [(4, 5)]),
    Case("mha_self", lambda: nn.MultiHeadAttention(8, 2, **F64),
         lambda: T.MultiheadAttention(8, 2, batch_first=True), [(2, 5, 8)],
         torch_kwargs={"need_weights": False}, repeat_torch=3),
    Case("mha_cross", lambda: nn.MultiHeadAttention(8, 4, **F64),
         lambda: T.MultiheadAttention(8, 4, batch_first=True), [(2, 3, 8), (2, 6, 8), (2, 6, 8)],
         torch_kwargs={"need_weights": False}),
    Case("transformer_block", lambda: nn.TransformerBlock(8, 2, 16, **F64),
         lambda: T.TransformerEncoderLayer(8, 2, 16, 0.0, "gelu", batch_first=True,
                                           norm_first=True), [(2, 5, 8)]),
    Case("lstm", lambda: nn.LSTM(3, 5, 2, **F64), lambda: T.LSTM(3, 5, 2), [(6, 2, 3)]),
    Case("gru", lambda: nn.GRU(3, 5, batch_first=True, **F64),
         lambda: T.GRU(3, 5, batch_first=True), [(2, 6, 3)]),
    Case("lstm_bidirectional_nobias", lambda: nn.LSTM(3, 4, 2, False, bidirectional=True, **F64),
         lambda: T.LSTM(3, 4, 2, False, bidirectional=True), [(5, 2, 3)]),
    Case("gru_bidirectional", lambda: nn.GRU(3, 4, 2, batch_first=True, bidirectional=True, **F64),
         lambda: T.GRU(3, 4, 2, batch_first=True, bidirectional=True), [(2, 5, 3)]),
]  # fmt: skip


def _inputs(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for i, s in enumerate(case.shapes):
        if i == 0 and case.ints:
            out.append(rng.integers(0, case.ints, size=s))
        else:
            out.append(rng.normal(size=s))
    return out


def _load_torch_weights(m: nn.Module, tm: torch.nn.Module) -> None:
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def run_and_compare(
    case: Case, m: nn.Module, tm: torch.nn.Module, rng: np.random.Generator, dev: em.Device = AD
) -> None:
    """Forward both on the same inputs, then backward a random projection of the outputs."""
    xs = _inputs(case, rng)
    ex = [
        em.Tensor.from_data(a, device=dev) if a.dtype.kind == "i" else
        em.Tensor.from_data(a, device=dev).require_grad() for a in xs
    ]  # fmt: skip
    tx = [
        torch.tensor(a) if a.dtype.kind == "i" else torch.tensor(a, requires_grad=True) for a in xs
    ]
    ys = _out_list(m(*ex, **case.kwargs))
    tys = _out_list(tm(*tx * case.repeat_torch, **{**case.kwargs, **case.torch_kwargs}))
    assert len(ys) == len(tys)
    loss = None
    tloss = 0
    for y, ty in zip(ys, tys):
        np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-9, atol=case.atol)
        w = rng.normal(size=y.shape)
        term = (y * em.Tensor.from_data(w, device=dev.without_autodiff())).sum()
        loss = term if loss is None else loss + term
        tloss = tloss + (ty * torch.tensor(w)).sum()
    # every case has a float input or a parameter: its loss must carry a graph, or the
    # gradient half of the comparison would silently not run
    assert loss is not None and loss.is_tracked(), f"{case.name}: the output is not tracked"
    grads = loss.backward()
    tloss.backward()  # type: ignore[union-attr]
    for x, t in zip(ex, tx):
        if t.requires_grad:
            np.testing.assert_allclose(x.grad(grads).to_numpy(), t.grad.numpy(), atol=1e-9)  # type: ignore[union-attr]
    tparams = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        g = p.val().grad(grads)
        assert g is not None, name
        np.testing.assert_allclose(
            g.to_numpy(), tparams[name].grad.numpy(), atol=1e-9, err_msg=name
        )  # type: ignore[union-attr]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_torch(case: Case, device: em.Device) -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    tm = case.make_torch().double()
    dev = device.autodiff()
    m = case.make().fork(dev)
    assert sorted(n for n, _ in m.named_parameters()) == sorted(n for n, _ in tm.named_parameters())
    _load_torch_weights(m, tm)
    run_and_compare(case, m, tm, rng, dev)
    for name, b in m.named_buffers():  # batch-norm running statistics after one training step
        tb = dict(tm.named_buffers())[name]
        np.testing.assert_allclose(b.to_numpy(), tb.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    if any(True for _ in m.named_buffers()):  # and in evaluation mode, with those statistics
        m.valid()
        tm.eval()
        x = _inputs(case, rng)[0]
        y = m(em.Tensor.from_data(x, device=device))
        assert not y.is_autodiff()
        np.testing.assert_allclose(y.to_numpy(), tm(torch.tensor(x)).detach().numpy(), atol=1e-10)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_save_load_is_bit_exact(case: Case, tmp_path: Path) -> None:
    m = case.make()
    m.save(tmp_path / "m.safetensors")
    other = case.make().load(tmp_path / "m.safetensors")
    for (n, a), (_, b) in zip(m.state_dict().items(), other.state_dict().items()):
        assert a.to_numpy().tobytes() == b.to_numpy().tobytes(), n
    assert [p.id for p in m.parameters()] == [p.id for p in other.parameters()]


def test_batch_norm_valid_uses_running_statistics() -> None:
    rng = np.random.default_rng(1)
    m, tm = nn.BatchNorm2d(3, **F64), T.BatchNorm2d(3).double()
    for _ in range(3):
        x = rng.normal(2.0, 3.0, size=(4, 3, 2, 2))
        m(em.Tensor.from_data(x))
        tm(torch.tensor(x))
    m.valid()
    tm.eval()
    x = rng.normal(size=(2, 3, 2, 2))
    np.testing.assert_allclose(
        m(em.Tensor.from_data(x)).to_numpy(), tm(torch.tensor(x)).detach().numpy(), atol=1e-12
    )
    assert int(m.num_batches_tracked.item()) == 3
    before = m.running_mean.to_numpy()
    m(em.Tensor.from_data(x))
    np.testing.assert_array_equal(m.running_mean.to_numpy(), before)  # frozen in valid mode


def test_batch_norm_cumulative_average_counts_across_loads() -> None:
    # momentum=None averages over num_batches_tracked, which survives load_state_dict
    rng = np.random.default_rng(5)
    xs = [rng.normal(1.0, 2.0, size=(4, 3)) for _ in range(4)]
    m, tm = nn.BatchNorm1d(3, momentum=None, **F64), T.BatchNorm1d(3, momentum=None).double()
    for x in xs[:2]:
        m(em.Tensor.from_data(x))
        tm(torch.tensor(x))
    other = nn.BatchNorm1d(3, momentum=None, **F64)
    other.load_state_dict(m.state_dict())
    for x in xs[2:]:
        other(em.Tensor.from_data(x))
        tm(torch.tensor(x))
    assert int(other.num_batches_tracked.item()) == 4
    np.testing.assert_allclose(other.running_mean.to_numpy(), tm.running_mean.numpy(), atol=1e-12)
    np.testing.assert_allclose(other.running_var.to_numpy(), tm.running_var.numpy(), atol=1e-12)


def test_mha_masks_match_torch() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    m, tm = (
        nn.MultiHeadAttention(8, 2, **F64),
        T.MultiheadAttention(8, 2, batch_first=True).double(),
    )
    _load_torch_weights(m, tm)
    x = rng.normal(size=(2, 5, 8))
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, 3:] = True
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    additive = rng.normal(size=(5, 5))
    pad_float = torch.zeros(2, 5, dtype=torch.float64).masked_fill(torch.tensor(pad), -np.inf)
    for kw, tkw in [
        ({"is_causal": True}, {"attn_mask": torch.tensor(causal), "is_causal": True}),
        ({"key_padding_mask": em.Tensor.from_data(pad)}, {"key_padding_mask": torch.tensor(pad)}),
        (
            {"key_padding_mask": em.Tensor.from_data(pad), "is_causal": True},
            {"key_padding_mask": torch.tensor(pad), "attn_mask": torch.tensor(causal)},
        ),
        ({"attn_mask": em.Tensor.from_data(additive)}, {"attn_mask": torch.tensor(additive)}),
        (
            {
                "attn_mask": em.Tensor.from_data(additive),
                "key_padding_mask": em.Tensor.from_data(pad),
            },
            {"attn_mask": torch.tensor(additive), "key_padding_mask": pad_float},
        ),
    ]:
        y = m(em.Tensor.from_data(x, device=AD), **kw)
        ty = tm(*(torch.tensor(x),) * 3, need_weights=False, **tkw)[0]
        np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), atol=1e-10, err_msg=str(kw))


def test_causal_transformer_block_matches_torch() -> None:
    torch.manual_seed(0)
    m = nn.TransformerBlock(8, 2, 16, **F64)
    tm = T.TransformerEncoderLayer(
        8, 2, 16, 0.0, "gelu", batch_first=True, norm_first=True
    ).double()
    _load_torch_weights(m, tm)
    x = np.random.default_rng(3).normal(size=(2, 5, 8))
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    ty = tm(torch.tensor(x), src_mask=causal, is_causal=True)
    y = m(em.Tensor.from_data(x, device=AD), is_causal=True)
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), atol=1e-10)


def test_rotary_encoding_matches_reference() -> None:
    x = np.random.default_rng(4).normal(size=(2, 3, 6, 8))
    rope = nn.RotaryEncoding(8, max_seq_len=16, theta=100.0)
    y = rope(em.Tensor.from_data(x), start=2).to_numpy()
    pos = np.arange(2, 8)[:, None]
    freq = 100.0 ** (-np.arange(0, 8, 2) / 8)
    ang = pos * freq  # (T, 4)
    x1, x2 = x[..., :4], x[..., 4:]
    ref = np.concatenate(
        [x1 * np.cos(ang) - x2 * np.sin(ang), x2 * np.cos(ang) + x1 * np.sin(ang)], -1
    )
    np.testing.assert_allclose(y, ref, atol=1e-12)
    # relative: the score of positions (i, j) depends only on i - j
    q = em.Tensor.from_data(np.ones((1, 8)))
    a = (rope(q, start=3) * rope(q, start=1)).sum().item()
    b = (rope(q, start=7) * rope(q, start=5)).sum().item()
    assert abs(a - b) < 1e-12
    with pytest.raises(em.ShapeError, match="RotaryEncoding"):
        rope(em.Tensor.from_data(np.ones((20, 8))))


def test_dropout_trains_and_turns_off_in_valid() -> None:
    em.seed(0)
    d = nn.Dropout(0.25)
    x = em.Tensor.ones((200, 100), device=AD)
    y = d(x).to_numpy()
    assert 0.2 < (y == 0).mean() < 0.3
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1.0) / np.float32(0.75))}
    d.valid()
    assert d(x) is x


def test_rms_norm_default_eps_is_the_dtypes_machine_epsilon() -> None:
    for dtype in (em.float16, em.bfloat16, em.float32, em.float64):
        want = torch.finfo(getattr(torch, dtype.name)).eps
        assert nn.RmsNorm(4, dtype=dtype).eps == want


def test_initialisation_matches_torch_statistics() -> None:
    em.seed(0)
    lin = nn.Linear(400, 300)
    w = lin.weight.val().to_numpy()
    bound = 1 / np.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01 * bound
    conv = nn.Conv2d(8, 4, 3)
    assert np.abs(conv.weight.val().to_numpy()).max() <= 1 / np.sqrt(8 * 9)
    # the transposed layout [in, out / groups, kh, kw]: fan_in from dim 1, as in PyTorch
    tconv = nn.ConvTranspose2d(64, 32, 3, groups=2)
    tw, tb = tconv.weight.val().to_numpy(), tconv.bias.val().to_numpy()  # type: ignore[union-attr]
    bound = 1 / np.sqrt(16 * 9)
    assert tw.shape == (64, 16, 3, 3)
    assert bound * 0.98 < np.abs(tw).max() <= bound
    assert bound * 0.5 < np.abs(tb).max() <= bound
    emb = nn.Embedding(1000, 50).weight.val().to_numpy()
    assert abs(emb.std() - 1.0) < 0.02
    mha = nn.MultiHeadAttention(16, 4)
    assert np.all(mha.in_proj_bias.val().to_numpy() == 0)  # type: ignore[union-attr]
    assert np.abs(mha.in_proj_weight.val().to_numpy()).max() <= np.sqrt(6 / (16 + 48))


def test_recurrent_initial_state_matches_torch() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 2, 3))
    h0, c0 = rng.normal(size=(2, 2, 5)), rng.normal(size=(2, 2, 5))
    m, tm = nn.LSTM(3, 5, 2, **F64), T.LSTM(3, 5, 2).double()
    _load_torch_weights(m, tm)
    out, (h, c) = m(em.Tensor.from_data(x), (em.Tensor.from_data(h0), em.Tensor.from_data(c0)))
    tout, (th, tc) = tm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    for a, b in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(a.to_numpy(), b.detach().numpy(), atol=1e-12)
    g, tg = nn.GRU(3, 5, 2, **F64), T.GRU(3, 5, 2).double()
    _load_torch_weights(g, tg)
    out, h = g(em.Tensor.from_data(x), em.Tensor.from_data(h0))
    tout, th = tg(torch.tensor(x), torch.tensor(h0))
    np.testing.assert_allclose(out.to_numpy(), tout.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(h.to_numpy(), th.detach().numpy(), atol=1e-12)
