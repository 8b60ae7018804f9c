"""The NumPy and torch backends agree on NaN, inf and -inf inputs (docs/NONFINITE.md; issue 12).

Every registry row runs on both backends with each float input poisoned by NaN, inf and -inf;
forwards and gradients must match, NaN for NaN. Where the two disagreed the NumPy backend was
made to follow PyTorch. Rows whose NumPy kernels still differ are listed in ``KNOWN`` as strict
xfails (each turns into a failure once it agrees, so the list can only shrink).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from helpers.sampling import Case, run_row, sample_cases

import ember as em
from ember.ops.registry import OPS, OpSpec

torch = pytest.importorskip("torch")

SPECIALS = (np.nan, np.inf, -np.inf)
_SKIP = {"to_device"}  # moves between devices: nothing to compare across backends
# rows whose kernels (not the elementwise methods) still disagree; which side PyTorch takes is
# noted, docs/NONFINITE.md lists them
KNOWN: dict[str, str] = {}


def _poisoned(a: np.ndarray, start: int) -> np.ndarray:
    """``a`` with NaN, inf and -inf spread over its elements from ``start`` on."""
    out = np.array(a, dtype=a.dtype, copy=True)
    flat = out.reshape(-1)
    for i, v in enumerate(SPECIALS):
        flat[(start + 5 * i) % flat.size] = v
    return out


def _run(
    spec: OpSpec, arrays: tuple[np.ndarray, ...], attrs: dict[str, Any], dev: em.Device
) -> Any:
    """(output, gradients) on ``dev`` as float64 NumPy arrays, or the exception's type."""
    ad = dev.autodiff()
    xs = []
    for a in arrays:
        if a.dtype.kind == "f":
            t = em.Tensor.from_data(a, device=ad, dtype=em.float64)
            xs.append(t.require_grad() if spec.differentiable else t)
        else:
            xs.append(em.Tensor.from_data(a, device=ad))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's invalid-value warnings
            out = run_row(spec, xs, dict(attrs))
            grads = out.backward() if out.is_tracked() else None
    except em.EmberError as e:
        return type(e)
    gs = [] if grads is None else [t.grad(grads) for t in xs]
    return out.to_numpy(), [None if g is None else g.to_numpy() for g in gs]


def _cases(spec: OpSpec) -> list[Case]:
    """Each sampled case twice per float input, that input poisoned (two placements)."""
    out = []
    for arrays, attrs in sample_cases(spec, np.random.default_rng(12)):
        for i, a in enumerate(arrays):
            if a.dtype.kind == "f" and a.size:
                for start in (0, 1):
                    bad = tuple(_poisoned(b, start) if j == i else b for j, b in enumerate(arrays))
                    out.append((bad, attrs))
    return out


def _rows() -> list[Any]:
    rows = []
    for name, spec in OPS.items():
        if name in _SKIP:
            continue
        marks = [pytest.mark.xfail(reason=KNOWN[name], strict=True)] if name in KNOWN else []
        rows.append(pytest.param(spec, id=name, marks=marks))
    return rows


@pytest.mark.parametrize("spec", _rows())
def test_backends_agree_on_nonfinite_inputs(spec: OpSpec) -> None:
    cases = _cases(spec)
    if not cases:
        pytest.skip(f"{spec.name} takes no float input")
    for arrays, attrs in cases:
        got = _run(spec, arrays, attrs, em.Device.cpu())
        ref = _run(spec, arrays, attrs, em.Device.torch("cpu"))
        if isinstance(ref, type) or isinstance(got, type):
            assert got == ref, (spec.name, got, ref)
            continue
        (out, grads), (ref_out, ref_grads) = got, ref
        np.testing.assert_allclose(out, ref_out, rtol=1e-9, atol=1e-12, err_msg=spec.name)
        assert len(grads) == len(ref_grads)
        for g, r in zip(grads, ref_grads, strict=True):
            assert (g is None) == (r is None), spec.name
            if g is not None:
                np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-12, err_msg=spec.name)


# ---------------------------------------------------------------- the cases named in issue 12
X = [np.nan, np.inf, -np.inf, -0.0, 0.0, -2.0, 0.5]


def _both(fn: Any, dtype: em.DType = em.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(NumPy backend, torch backend, x's gradient on each) of ``fn(x).sum()`` for x = X."""
    outs, grads = [], []
    for dev in (em.Device.cpu(), em.Device.torch("cpu")):
        x = em.Tensor.from_data(X, device=dev.autodiff(), dtype=dtype).require_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            y = fn(x)
            g = x.grad(y.sum().backward())
        assert g is not None
        outs.append(y.to_numpy().astype(np.float64))
        grads.append(g.to_numpy().astype(np.float64))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-12, atol=0)  # NaN matches only NaN
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=0)
    return outs[0], grads[0], np.asarray(X)


def _torch_ref(fn: Any, dtype: Any = None) -> tuple[np.ndarray, np.ndarray]:
    x = torch.tensor(X, dtype=dtype or torch.float64, requires_grad=True)
    y = fn(x)
    y.sum().backward()
    assert x.grad is not None
    return y.detach().double().numpy(), x.grad.double().numpy()


@pytest.mark.parametrize(
    "name",
    [
        "sign",
        "abs",
        "relu",
        "gelu",
        "gelu_tanh",
        "rsqrt",
        "sqrt",
        "exp",
        "log",
        "tanh",
        "sigmoid",
        "silu",
    ],
)
def test_named_elementwise_rows_follow_pytorch(name: str) -> None:
    import ember.nn.functional as F

    TF = torch.nn.functional
    ours = {
        "sign": lambda x: x.sign(),
        "abs": lambda x: x.abs(),
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "rsqrt": lambda x: x.powf_scalar(-0.5),
        "sqrt": lambda x: x.sqrt(),
        "exp": lambda x: x.exp(),
        "log": lambda x: x.log(),
        "tanh": lambda x: x.tanh(),
        "sigmoid": F.sigmoid,
        "silu": F.silu,
    }[name]
    theirs = {
        "sign": torch.sign,
        "abs": torch.abs,
        "relu": torch.relu,
        "gelu": TF.gelu,
        "gelu_tanh": lambda x: TF.gelu(x, approximate="tanh"),
        "rsqrt": lambda x: torch.pow(x, -0.5),
        "sqrt": torch.sqrt,
        "exp": torch.exp,
        "log": torch.log,
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        "silu": TF.silu,
    }[name]
    out, grad, _ = _both(ours)
    ref, ref_grad = _torch_ref(theirs)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=0)


@pytest.mark.parametrize("src", [em.float64, em.float32])
@pytest.mark.parametrize("dst", [em.float16, em.bfloat16, em.float32])
def test_casts_of_nonfinite_values_agree(src: em.DType, dst: em.DType) -> None:
    """NaN and +-inf survive every float cast; values beyond the range round to +-inf."""
    x = [np.nan, np.inf, -np.inf, 1e10, -1e10, 7e4, 1.0]
    got = [
        em.Tensor.from_data(x, device=dev, dtype=src).cast(dst).to_numpy().astype(np.float64)
        for dev in (em.Device.cpu(), em.Device.torch("cpu"))
    ]
    tdst = {em.float16: torch.float16, em.bfloat16: torch.bfloat16, em.float32: torch.float32}[dst]
    tsrc = torch.float64 if src is em.float64 else torch.float32
    ref = torch.tensor(x, dtype=tsrc).to(tdst).double().numpy()
    np.testing.assert_array_equal(got[0], ref)
    np.testing.assert_array_equal(got[1], ref)


# ------------------------------------- the fused rows that once differed, against PyTorch itself
def _torch_row(name: str, arrays: tuple[np.ndarray, ...], attrs: dict[str, Any]) -> Any:
    """(output, gradients) of PyTorch's own function for the row ``name``, as float64 NumPy."""
    TF = torch.nn.functional
    ts = [
        torch.tensor(a, dtype=torch.float64, requires_grad=True)
        if a.dtype.kind == "f"
        else torch.tensor(a).long()
        for a in arrays
    ]
    if name == "layer_norm":
        nd = attrs["normalized_ndim"]
        y = TF.layer_norm(ts[0], ts[0].shape[-nd:], ts[1], ts[2], attrs["eps"])
    elif name == "batch_norm":
        y = TF.batch_norm(ts[0], None, None, ts[1], ts[2], training=True, eps=attrs["eps"])
    else:
        y = TF.cross_entropy(
            ts[0],
            ts[1],
            reduction="none",
            ignore_index=attrs["ignore_index"],
            label_smoothing=attrs["label_smoothing"],
        )
    y.backward(torch.ones_like(y))
    return y.detach().numpy(), [t.grad.numpy() if t.requires_grad else None for t in ts]


@pytest.mark.parametrize("dev", [em.Device.cpu(), em.Device.torch("cpu")], ids=str)
@pytest.mark.parametrize("name", ["layer_norm", "batch_norm", "cross_entropy"])
def test_fused_rows_follow_pytorch_on_nonfinite_inputs(name: str, dev: em.Device) -> None:
    """An inf weight in layer/batch norm, -inf at a smoothed target: NaN and inf as PyTorch."""
    spec = OPS[name]
    for arrays, attrs in _cases(spec):
        got = _run(spec, arrays, attrs, dev)
        assert not isinstance(got, type), (name, got)
        (out, grads), (ref_out, ref_grads) = got, _torch_row(name, arrays, attrs)
        np.testing.assert_allclose(out, ref_out, rtol=1e-9, atol=1e-12, err_msg=name)
        for g, r in zip(grads, ref_grads, strict=True):
            if r is not None:
                np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("dev", [em.Device.cpu(), em.Device.torch("cpu")], ids=str)
def test_ignored_row_with_nan_logits_as_pytorch(dev: em.Device) -> None:
    """An ignore_index row adds 0 to the loss; its gradient is NaN where its logits hold a NaN
    or inf (PyTorch's log-softmax backward meets 0 * NaN there too), finite rows unaffected."""
    x = np.array([[np.nan, 1.0, 2.0], [0.0, 1.0, 2.0], [np.inf, 1.0, 2.0], [0.5, -1.0, 3.0]])
    y = np.array([1, 2, 1, 0])
    for eps in (0.0, 0.2):
        attrs = {"ignore_index": 1, "label_smoothing": eps}
        out, grads = _run(OPS["cross_entropy"], (x, y), attrs, dev)
        ref_out, ref_grads = _torch_row("cross_entropy", (x, y), attrs)
        np.testing.assert_array_equal(out[[0, 2]], 0.0)
        np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=0)
        assert np.isnan(ref_grads[0][[0, 2]]).all()
        np.testing.assert_allclose(grads[0], ref_grads[0], rtol=1e-12, atol=0)
