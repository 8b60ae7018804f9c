"""TransformerEncoderLayer / TransformerDecoderLayer, their stacks and MultiheadAttention against
PyTorch's in float64: PyTorch state_dicts load unchanged, outputs, input gradients and parameter
gradients match, in both layouts, pre- and post-norm, with bool and float masks, on NumPy and
torch CPU; gradient checkpointing and em.capture give the eager results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

T = torch.nn
F64 = {"dtype": em.float64}
GP = em.optim.GradientsParams
E, H, FF = 8, 2, 16  # d_model, heads, feed-forward width
FWD, GRAD = 1e-10, 1e-9  # float64: a few hundred ulps of O(1) values


def _perturb(tm: torch.nn.Module, seed: int) -> None:
    """Give every torch parameter its own random values (norm weights away from ones, copies
    of one layer in a stack apart), so a wrongly mapped name cannot match by accident."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def _pair(make: Callable[..., Any], tmake: Callable[..., Any], dev: em.Device, **kw: Any) -> Any:
    tm = tmake(**kw).double()
    _perturb(tm, 0)
    m = make(**kw, **F64).fork(dev)
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in tm.named_parameters()]
    m.load_state_dict(tm.state_dict())  # torch tensors, names unchanged
    return m, tm


def _tensors(arrays: list[np.ndarray], dev: em.Device) -> tuple[list[em.Tensor], list[Any]]:
    ex = [em.Tensor.from_data(a, device=dev).require_grad() for a in arrays]
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ex, tx


def _mask(a: np.ndarray | None, dev: em.Device) -> tuple[Any, Any]:
    if a is None:
        return None, None
    return em.Tensor.from_data(a, device=dev.without_autodiff()), torch.tensor(a)


def _check(
    m: nn.Module, tm: torch.nn.Module, y: em.Tensor, ty: Any, ex: list[Any], tx: list[Any]
) -> None:
    """Outputs, then the gradients of a random projection of them (inputs and parameters)."""
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), rtol=1e-9, atol=FWD)
    w = np.random.default_rng(9).normal(size=y.shape)
    loss = (y * em.Tensor.from_data(w, device=y.device.without_autodiff())).sum()
    grads = loss.backward()
    (ty * torch.tensor(w)).sum().backward()
    for x, t in zip(ex, tx):
        np.testing.assert_allclose(x.grad(grads).to_numpy(), t.grad.numpy(), atol=GRAD)
    tparams = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        g = p.val().grad(grads)
        assert g is not None, name
        tg = tparams[name].grad
        assert tg is not None, name
        np.testing.assert_allclose(g.to_numpy(), tg.numpy(), atol=GRAD, err_msg=name)


def _torch_masks(masks: dict[str, Any], dev: em.Device) -> dict[str, Any]:
    """The torch masks; bool key padding masks as float beside a float mask (PyTorch warns
    about mixed types; ember takes them mixed)."""
    floats = any(a.dtype.kind == "f" for a in masks.values())
    out = {}
    for k, a in masks.items():
        if floats and "padding" in k and a.dtype == bool:
            a = np.where(a, -np.inf, 0.0)
        out[k] = _mask(a, dev)[1]
    return out


def _seq(rng: np.random.Generator, b: int, n: int, batch_first: bool) -> np.ndarray:
    return rng.normal(size=(b, n, E) if batch_first else (n, b, E))


def _padding(b: int, n: int, cut: int) -> np.ndarray:
    pad = np.zeros((b, n), dtype=bool)
    pad[-1, cut:] = True  # the last sequence is shorter; no row is fully masked
    return pad


def _causal(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n), dtype=bool), 1)


# each: ember kwargs, torch kwargs (masks as arrays; "causal" turns on is_causal in both)
ENCODER_MASKS = {
    "none": ({}, False),
    "causal": ({"src_mask": _causal(5)}, True),
    "bool_mask_and_padding": (
        {"src_mask": _causal(5), "src_key_padding_mask": _padding(3, 5, 3)},
        False,
    ),
    "float_mask_and_padding": (
        {
            "src_mask": np.random.default_rng(1).normal(size=(5, 5)),
            "src_key_padding_mask": _padding(3, 5, 4),
        },
        False,
    ),
    "per_head_float_mask": ({"src_mask": np.random.default_rng(2).normal(size=(6, 5, 5))}, False),
}


@pytest.mark.parametrize("mask", list(ENCODER_MASKS))
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_matches_torch(
    device: em.Device, batch_first: bool, norm_first: bool, mask: str
) -> None:
    dev = device.autodiff()
    kw = {"batch_first": batch_first, "norm_first": norm_first, "dropout": 0.0}
    act = "gelu" if norm_first else "relu"
    m, tm = _pair(nn.TransformerEncoderLayer, T.TransformerEncoderLayer, dev, d_model=E,
                  nhead=H, dim_feedforward=FF, activation=act, **kw)  # fmt: skip
    rng = np.random.default_rng(0)
    ex, tx = _tensors([_seq(rng, 3, 5, batch_first)], dev)
    masks, causal = ENCODER_MASKS[mask]
    ekw = {k: _mask(a, dev)[0] for k, a in masks.items()}
    tkw = _torch_masks(masks, dev)
    y = m(ex[0], is_causal=causal, **ekw)
    ty = tm(tx[0], is_causal=causal, **tkw)
    _check(m, tm, y, ty, ex, tx)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(
    device: em.Device, batch_first: bool, norm_first: bool
) -> None:
    dev = device.autodiff()
    kw = {"batch_first": batch_first, "norm_first": norm_first, "dropout": 0.0}
    m, tm = _pair(nn.TransformerDecoderLayer, T.TransformerDecoderLayer, dev, d_model=E,
                  nhead=H, dim_feedforward=FF, **kw)  # fmt: skip
    rng = np.random.default_rng(1)
    ex, tx = _tensors([_seq(rng, 3, 4, batch_first), _seq(rng, 3, 6, batch_first)], dev)
    # causal self-attention with padded targets, float memory mask with padded memory
    cases = [
        ({"tgt_mask": _causal(4), "memory_key_padding_mask": _padding(3, 6, 2)}, True),
        (
            {
                "tgt_key_padding_mask": _padding(3, 4, 2),
                "memory_mask": rng.normal(size=(4, 6)),
                "memory_key_padding_mask": _padding(3, 6, 5),
            },
            False,
        ),
    ]
    for masks, causal in cases:
        ekw = {k: _mask(a, dev)[0] for k, a in masks.items()}
        tkw = _torch_masks(masks, dev)
        ex, tx = _tensors([a.to_numpy() for a in ex], dev)
        y = m(*ex, tgt_is_causal=causal, **ekw)
        ty = tm(*tx, tgt_is_causal=causal, **tkw)
        tm.zero_grad()
        _check(m, tm, y, ty, ex, tx)


@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_stack_matches_torch(device: em.Device, batch_first: bool) -> None:
    dev = device.autodiff()

    def make(**kw: Any) -> Any:
        layer = nn.TransformerEncoderLayer(E, H, FF, 0.0, batch_first=batch_first, **kw)
        return nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E, **kw))

    def tmake() -> Any:
        layer = T.TransformerEncoderLayer(E, H, FF, 0.0, batch_first=batch_first)
        return T.TransformerEncoder(layer, 3, norm=T.LayerNorm(E), enable_nested_tensor=False)

    m, tm = _pair(make, tmake, dev)
    assert len({p.id for p in m.parameters()}) == len(list(m.parameters()))  # own parameters
    rng = np.random.default_rng(2)
    ex, tx = _tensors([_seq(rng, 2, 5, batch_first)], dev)
    pad_e, pad_t = _mask(_padding(2, 5, 3), dev)
    y = m(ex[0], src_key_padding_mask=pad_e)
    ty = tm(tx[0], src_key_padding_mask=pad_t)
    _check(m, tm, y, ty, ex, tx)


def test_decoder_stack_matches_torch(device: em.Device) -> None:
    dev = device.autodiff()

    def make(**kw: Any) -> Any:
        layer = nn.TransformerDecoderLayer(E, H, FF, 0.0, norm_first=True, **kw)
        return nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(E, **kw))

    def tmake() -> Any:
        layer = T.TransformerDecoderLayer(E, H, FF, 0.0, norm_first=True)
        return T.TransformerDecoder(layer, 2, norm=T.LayerNorm(E))

    m, tm = _pair(make, tmake, dev)
    rng = np.random.default_rng(3)
    ex, tx = _tensors([_seq(rng, 2, 4, False), _seq(rng, 2, 3, False)], dev)
    mask_e, mask_t = _mask(_causal(4), dev)
    y = m(*ex, tgt_mask=mask_e, tgt_is_causal=True)
    ty = tm(*tx, tgt_mask=mask_t, tgt_is_causal=True)
    _check(m, tm, y, ty, ex, tx)


def test_callable_activation_no_bias_and_unbatched(device: em.Device) -> None:
    dev = device.autodiff()
    m, tm = _pair(
        lambda **kw: nn.TransformerEncoderLayer(E, H, FF, 0.0, nn.GELU("tanh"), bias=False, **kw),
        lambda: T.TransformerEncoderLayer(
            E, H, FF, 0.0, lambda x: T.functional.gelu(x, approximate="tanh"), bias=False
        ),
        dev,
    )
    assert not any("bias" in n for n, _ in m.named_parameters())
    ex, tx = _tensors([np.random.default_rng(4).normal(size=(5, E))], dev)  # unbatched (S, E)
    pad_e, pad_t = _mask(np.array([False, False, False, True, True]), dev)
    _check(m, tm, m(ex[0], src_key_padding_mask=pad_e), tm(tx[0], src_key_padding_mask=pad_t),
           ex, tx)  # fmt: skip


def test_eval_mode_turns_dropout_off(device: em.Device) -> None:
    m, tm = _pair(nn.TransformerDecoderLayer, T.TransformerDecoderLayer, device.autodiff(),
                  d_model=E, nhead=H, dim_feedforward=FF, dropout=0.3)  # fmt: skip
    m.valid()
    tm.eval()
    rng = np.random.default_rng(5)
    tgt, mem = rng.normal(size=(4, 2, E)), rng.normal(size=(3, 2, E))
    y = m(em.Tensor.from_data(tgt, device=device), em.Tensor.from_data(mem, device=device))
    ty = tm(torch.tensor(tgt), torch.tensor(mem))
    np.testing.assert_allclose(y.to_numpy(), ty.detach().numpy(), atol=FWD)
    m.train()  # dropout back on: outputs change
    y2 = m(em.Tensor.from_data(tgt, device=device), em.Tensor.from_data(mem, device=device))
    assert np.abs(y2.to_numpy() - y.to_numpy()).max() > 1e-3


@pytest.mark.parametrize("average", [True, False])
def test_multihead_attention_matches_torch(device: em.Device, average: bool) -> None:
    dev = device.autodiff()
    m, tm = _pair(nn.MultiheadAttention, T.MultiheadAttention, dev, embed_dim=E, num_heads=H)
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(4, 2, E)), rng.normal(size=(6, 2, E)), rng.normal(size=(6, 2, E))
    pad = _padding(2, 6, 3)
    pad_e, pad_t = _mask(pad, dev)[0], _mask(np.where(pad, -np.inf, 0.0), dev)[1]
    am_e, am_t = _mask(rng.normal(size=(2 * H, 4, 6)), dev)  # (B * H, T, S), float
    for need in (True, False):
        ex, tx = _tensors([q, k, v], dev)
        kw = {"need_weights": need, "average_attn_weights": average}
        y, w = m(*ex, key_padding_mask=pad_e, attn_mask=am_e, **kw)
        ty, tw = tm(*tx, key_padding_mask=pad_t, attn_mask=am_t, **kw)
        if need:
            assert w is not None and w.shape == tuple(tw.shape)
            np.testing.assert_allclose(w.to_numpy(), tw.detach().numpy(), atol=FWD)
        else:
            assert w is None and tw is None
        tm.zero_grad()
        _check(m, tm, y, ty, ex, tx)


@pytest.mark.parametrize("need", [True, False])
def test_multihead_kdim_vdim_bias_kv_zero_attn_match_torch(device: em.Device, need: bool) -> None:
    dev = device.autodiff()
    kw = {"embed_dim": E, "num_heads": H, "kdim": 3, "vdim": 5, "add_bias_kv": True,
          "add_zero_attn": True}  # fmt: skip
    m, tm = _pair(nn.MultiheadAttention, T.MultiheadAttention, dev, **kw)
    assert {"q_proj_weight", "k_proj_weight", "bias_k", "bias_v"} <= dict(m.state_dict()).keys()
    rng = np.random.default_rng(11)
    ex, tx = _tensors([rng.normal(size=(4, 2, E)), rng.normal(size=(6, 2, 3)),
                       rng.normal(size=(6, 2, 5))], dev)  # fmt: skip
    pad_e, pad_t = _mask(_padding(2, 6, 2), dev)
    am = np.zeros((4, 6), dtype=bool)
    am[0, 1:] = True
    am_e, am_t = _mask(am, dev)
    y, w = m(*ex, key_padding_mask=pad_e, attn_mask=am_e, need_weights=need)
    ty, tw = tm(*tx, key_padding_mask=pad_t, attn_mask=am_t, need_weights=need)
    if need:
        assert w is not None and w.shape == (2, 4, 8)  # S + bias_k + zero
        np.testing.assert_allclose(w.to_numpy(), tw.detach().numpy(), atol=FWD)
    _check(m, tm, y, ty, ex, tx)


def test_multihead_self_attention_batch_first_float_padding(device: em.Device) -> None:
    dev = device.autodiff()
    m, tm = _pair(nn.MultiheadAttention, T.MultiheadAttention, dev, embed_dim=E, num_heads=H,
                  batch_first=True)  # fmt: skip
    pad = _padding(2, 5, 2)
    fpad = np.where(pad, -np.inf, 0.0)  # a float key padding mask is added
    pad_e, pad_t = _mask(fpad, dev)
    ex, tx = _tensors([np.random.default_rng(7).normal(size=(2, 5, E))], dev)
    y, _ = m(ex[0], ex[0], ex[0], key_padding_mask=pad_e, need_weights=False)
    ty, _ = tm(tx[0], tx[0], tx[0], key_padding_mask=pad_t, need_weights=False)
    _check(m, tm, y, ty, ex, tx)


def _encoder(dev: em.Device) -> nn.Module:
    """Two pre-norm layers in float32 holding the values of a seeded PyTorch stack."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, FF, 0.0, "gelu", batch_first=True, norm_first=True)
    torch_sd = T.TransformerEncoder(
        T.TransformerEncoderLayer(E, H, FF, 0.0, "gelu", batch_first=True, norm_first=True), 2,
        enable_nested_tensor=False,
    ).state_dict()  # fmt: skip
    stack = nn.TransformerEncoder(cast(nn.TransformerEncoderLayer, layer.fork(dev)), 2)
    return stack.load_state_dict(torch_sd)


def test_gradient_checkpointing_gives_the_eager_gradients(device: em.Device) -> None:
    x = np.random.default_rng(8).normal(size=(2, 5, E)).astype(np.float32)
    out = []
    for dev in (device.autodiff(), device.autodiff().gradient_checkpointing()):
        m = _encoder(dev)
        loss = (m(em.Tensor.from_data(x, device=dev), is_causal=True) ** 2).mean()
        grads = loss.backward()
        out.append([p.val().grad(grads).to_numpy() for p in m.parameters()])  # type: ignore[union-attr]
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_captured_training_step_equals_eager(device: em.Device) -> None:
    rng = np.random.default_rng(10)
    data = [
        (
            em.Tensor.from_data(rng.normal(size=(2, 5, E)).astype(np.float32), device=device),
            em.Tensor.from_data(rng.normal(size=(2, 5, E)).astype(np.float32), device=device),
        )
        for _ in range(4)
    ]
    pad = em.Tensor.from_data(_padding(2, 5, 3), device=device)

    def step(model: Any, optim: Any, x: em.Tensor, y: em.Tensor, lr: float) -> em.Tensor:
        loss = ((model(x, src_key_padding_mask=pad) - y) ** 2).mean()
        optim.step(lr, model, GP.from_grads(loss.backward(), model))
        return loss

    results = []
    for fn in (step, em.capture(step)):
        model, optim = _encoder(device.autodiff()), em.optim.AdamW()
        losses = [fn(model, optim, x, y, 1e-2).item() for x, y in data]
        results.append((losses, [p.val().to_numpy() for p in model.parameters()]))
    (eager_losses, eager_params), (cap_losses, cap_params) = results
    assert eager_losses[-1] < eager_losses[0]
    # CPU backends: the captured call is the eager call (bit for bit); CUDA: a graph replay
    rtol, atol = (1e-5, 1e-6) if device.is_cuda else (0.0, 0.0)
    np.testing.assert_allclose(cap_losses, eager_losses, rtol=rtol, atol=atol)
    for a, b in zip(eager_params, cap_params):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def test_stack_copies_are_independent() -> None:
    layer = nn.TransformerEncoderLayer(E, H, FF)
    stack = nn.TransformerEncoder(layer, 2)
    w0 = stack.state_dict()["layers.0.linear1.weight"].to_numpy()
    np.testing.assert_array_equal(w0, layer.linear1.weight.val().to_numpy())  # as deepcopy
    ids = [p.id for p in stack.parameters()] + [p.id for p in layer.parameters()]
    assert len(set(ids)) == len(ids)
    sd = stack.state_dict()
    sd["layers.1.linear1.weight"] = sd["layers.1.linear1.weight"] + 1.0
    stack.load_state_dict(sd)
    np.testing.assert_array_equal(stack.state_dict()["layers.0.linear1.weight"].to_numpy(), w0)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(em.ShapeError, match=r"TransformerEncoderLayer.*activation"):
        nn.TransformerEncoderLayer(E, H, activation="swish")
    with pytest.raises(em.DTypeError, match=r"TransformerDecoderLayer.*activation"):
        nn.TransformerDecoderLayer(E, H, activation=3)  # type: ignore[arg-type]
    with pytest.raises(em.ShapeError, match=r"MultiheadAttention.*divisible"):
        nn.MultiheadAttention(E, 3)
    with pytest.raises(em.ShapeError, match=r"MultiheadAttention.*key \(B, L, 4\)"):
        nn.MultiheadAttention(E, H, kdim=4)(*[em.Tensor.ones((3, 2, E))] * 3)
    layer = nn.TransformerEncoderLayer(E, H, FF, batch_first=True)
    with pytest.raises(em.ShapeError, match=r"TransformerEncoderLayer.*src \(B, L, E\)"):
        layer(em.Tensor.ones((2, 5, E + 1)))
    with pytest.raises(em.ShapeError, match=r"MultiheadAttention.*attn_mask"):
        layer(em.Tensor.ones((2, 5, E)), src_mask=em.Tensor.ones((4, 4)))
    with pytest.raises(em.ShapeError, match=r"MultiheadAttention.*key_padding_mask"):
        layer(em.Tensor.ones((2, 5, E)), src_key_padding_mask=em.Tensor.ones((2, 4)).bool())
    dec = nn.TransformerDecoderLayer(E, H, FF)
    with pytest.raises(em.ShapeError, match=r"TransformerDecoderLayer.*same batch"):
        dec(em.Tensor.ones((4, 2, E)), em.Tensor.ones((3, 3, E)))
    with pytest.raises(em.DTypeError, match=r"TransformerEncoder.*TransformerEncoderLayer"):
        nn.TransformerEncoder(dec, 2)  # type: ignore[arg-type]
    with pytest.raises(em.ShapeError, match=r"TransformerDecoder.*num_layers"):
        nn.TransformerDecoder(dec, 0)
