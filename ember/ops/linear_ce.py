"""The fused vocabulary projection + cross-entropy row (``F.linear_cross_entropy``).

``linear_cross_entropy(x (N, K), weight (V, K), bias (V,) or 0-d, target (N,))`` gives each row's
cross-entropy of ``x @ weight.T + bias`` against ``target`` without ever holding the (N, V)
logits or their gradient: the forward walks the vocabulary in column chunks of ``chunk``,
keeping a running logsumexp per row (the row's residual), and the backward walks them again,
recomputing each chunk's logits, turning them into that chunk's logit gradient
(``softmax - target``, smoothed) and folding it into the gradients of ``x``, the weight and
the bias at once. Peak extra memory is one (N, chunk) block instead of two (N, V) arrays.
Logits are reduced in float32 for float16/bfloat16 inputs (as ``cross_entropy``); gradients come
back in the inputs' dtypes. Per chunk, the logsumexp and the logit gradient are backend kernels
(``chunk_logsumexp``, ``ce_chunk_grad``): one pass each over the chunk on CUDA (Triton), a few
whole-chunk passes elsewhere.
"""

from __future__ import annotations

from typing import Any

from ..dtype import float32
from .registry import (
    Cost,
    Examples,
    Grads,
    Precision,
    Saves,
    _need,
    defop,
)


def _wide(b: Any, a: Any) -> Any:
    """``a`` in float32 when it is float16/bfloat16 (the reductions run in float32)."""
    return b.cast(a, float32) if b.dtype_of(a).itemsize < 4 else a


def _chunks(v: int, chunk: int) -> list[tuple[int, int]]:
    return [(lo, min(v, lo + chunk)) for lo in range(0, v, chunk)]


def _logits(b: Any, x: Any, weight: Any, bias: Any, lo: int, hi: int) -> Any:
    """Columns ``lo:hi`` of ``x @ weight.T + bias`` in the inputs' dtype (the chunk kernels
    widen half-precision logits to float32 as they read them)."""
    z = b.matmul(x, b.index(weight, (slice(lo, hi),)).mT)
    if bias.ndim:
        z = z + b.index(bias, (slice(lo, hi),))
    return z


def _safe_target(b: Any, target: Any, ignore_index: int) -> tuple[Any, Any]:
    """(valid mask (N,), target with ignored rows pointed at class 0)."""
    valid = b.not_equal(target, ignore_index)
    return valid, b.where(valid, target, b.zeros_like(target))


def linear_cross_entropy_forward(
    b: Any,
    x: Any,
    weight: Any,
    bias: Any,
    target: Any,
    ignore_index: int,
    label_smoothing: float,
    chunk: int,
) -> tuple[Any, Any]:
    """(loss (N,), lse (N,)): per-row losses (0 on ignored rows) and logsumexps."""
    n, v = x.shape[0], weight.shape[0]
    eps = label_smoothing
    acc = total = None
    for lo, hi in _chunks(v, chunk):
        z = _logits(b, x, weight, bias, lo, hi)
        c = b.chunk_logsumexp(z)  # (N, 1) float32: one pass over the chunk's logits
        if acc is None:
            acc = c
        else:  # logaddexp of the running and the chunk's logsumexp
            top = b.where(b.greater(c, acc), c, acc)
            acc = top + b.log(b.exp(acc - top) + b.exp(c - top))
        if eps:
            part = b.sum_dim(_wide(b, z), 1)
            total = part if total is None else total + part
    assert acc is not None
    lse = b.reshape(acc, (n,))
    valid, t = _safe_target(b, target, ignore_index)
    # the target logit, one row of the weight per row of x (float32 dot for half inputs)
    zt = b.reshape(b.sum_dim(_wide(b, x) * _wide(b, b.select(weight, t, 0)), 1), (n,))
    if bias.ndim:
        zt = zt + _wide(b, b.select(bias, t, 0))
    loss = lse - zt if not eps else lse - (1.0 - eps) * zt - b.reshape(total, (n,)) * (eps / v)
    zero = b.zeros_like(loss)
    return b.where(valid, loss, zero), lse


def _lce_examples(rng: Any) -> Examples:
    n = rng.normal
    t = rng.integers(0, 7, size=(5,))
    t2 = t.copy()
    t2[[0, 3]] = -100
    none = n(size=())
    return [
        ((n(size=(5, 4)), n(size=(7, 4)), n(size=(7,)), t), _attrs(-100, 0.0, 3)),
        ((n(size=(5, 4)), n(size=(7, 4)), none, t2), _attrs(-100, 0.0, 7)),
        ((n(size=(5, 4)), n(size=(7, 4)), n(size=(7,)), t2), _attrs(-100, 0.1, 2)),
    ]


def _attrs(ignore_index: int, label_smoothing: float, chunk: int) -> dict[str, Any]:
    return {"ignore_index": ignore_index, "label_smoothing": label_smoothing, "chunk": chunk}


def _flops(shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> float:
    x, w = shapes[0], shapes[1]
    return float(x[0] * x[1] * w[0])


@defop(
    "linear_cross_entropy",
    arity=4,
    cost=Cost.COMPUTE_BOUND,
    saves=Saves.INPUTS | Saves.RESIDUALS,
    forward=linear_cross_entropy_forward,
    examples=_lce_examples,
    precision=Precision.LOW,
    flops=_flops,
)
def linear_cross_entropy_backward(ctx: Any, grad: Any) -> Grads:
    x, weight, bias, target = ctx.inputs
    lse = ctx.saved
    a = ctx.attrs
    b = ctx.b
    n, v = x.shape[0], weight.shape[0]
    eps = a["label_smoothing"]
    valid, t = _safe_target(b, target, a["ignore_index"])
    g = b.where(valid, _wide(b, grad), b.zeros_like(_wide(b, grad)))
    g = b.reshape(g, (n, 1))
    lse = b.reshape(lse, (n, 1))
    t = b.reshape(t, (n, 1))
    need_x, need_w, need_b = _need(ctx, 0), _need(ctx, 1), _need(ctx, 2) and bias.ndim > 0
    gx = None
    gws: list[Any] = []
    gbs: list[Any] = []
    dt = b.dtype_of(x)
    for lo, hi in _chunks(v, a["chunk"]):
        z = _logits(b, x, weight, bias, lo, hi)
        # d loss / d logits = softmax - (1 - eps) onehot - eps / V, times each row's gradient,
        # in x's dtype: one pass over the chunk where the backend fuses it
        d = b.ce_chunk_grad(z, lse, t, g, lo, 1.0 - eps, eps / v, dt)
        w = b.index(weight, (slice(lo, hi),))
        if need_x:
            part = b.matmul(d, w)
            gx = part if gx is None else gx + part
        if need_w:
            gws.append(b.matmul(d.mT, x))
        if need_b:
            gbs.append(b.sum_dim(d, 0))
    gw = (gws[0] if len(gws) == 1 else b.cat(gws, 0)) if need_w else None
    gb = b.zeros_like(bias) if not bias.ndim and _need(ctx, 2) else None  # the placeholder
    if need_b:
        gb = b.reshape(gbs[0] if len(gbs) == 1 else b.cat(gbs, 1), (v,))
    return gx, gw, gb, None
