"""Fused neural-network rows: softmax, log-softmax, normalisation, losses, attention, embedding.

Each is one row with one saved activation set, not a chain of primitives. The softmax,
normalisation and attention rows write their backward once here, with backend primitives; a
backend may replace it with a fused kernel the row names (``fused_backward``: cuDNN / flash
attention, ATen's norm backwards). The loss rows' backwards are one kernel call. Cost classes
(SEMANTICS.md §7): softmax, log-softmax, the normalisation rows and the elementwise binary
cross-entropy rows are one pass over memory (memory-bound: a recipe under ``Balanced``);
attention, embedding and the other losses are compute-bound (their outputs are kept). Inputs
that get no gradient (class indices, embedding indices) are plain int arrays; every float input
gets its gradient.
"""

from __future__ import annotations

import math
from typing import Any

from .registry import (
    Cost,
    Domain,
    Examples,
    Grads,
    Precision,
    Saves,
    _need,
    attention_flops,
    defop,
)

CB = Cost.COMPUTE_BOUND
MB = Cost.MEMORY_BOUND
F = Domain.FLOAT


# ---------------------------------------------------------------- softmax family
def _softmax_examples(rng: Any) -> Examples:
    return [
        ((rng.normal(size=(3, 5)),), {"dim": 1}),
        ((rng.normal(size=(2, 3, 4)) * 3,), {"dim": 0}),
        ((rng.normal(size=(2, 1, 4)),), {"dim": 2}),
    ]


@defop(
    "softmax",
    arity=1,
    cost=MB,
    saves=Saves.OUTPUT,
    dtypes=F,
    examples=_softmax_examples,
    precision=Precision.FULL,
    fused_backward="softmax_backward",
)
def softmax_backward(ctx: Any, grad: Any) -> Grads:
    # d softmax: y * (g - sum(g * y, dim))
    y = ctx.output
    return (y * (grad - ctx.b.sum_dim(grad * y, ctx.attrs["dim"])),)


@defop(
    "log_softmax",
    arity=1,
    cost=MB,
    saves=Saves.OUTPUT,
    dtypes=F,
    examples=_softmax_examples,
    precision=Precision.FULL,
    fused_backward="log_softmax_backward",
)
def log_softmax_backward(ctx: Any, grad: Any) -> Grads:
    # d log_softmax: g - exp(y) * sum(g, dim)
    b = ctx.b
    return (grad - b.exp(ctx.output) * b.sum_dim(grad, ctx.attrs["dim"]),)


# ---------------------------------------------------------------- normalisation
def _sum_over(b: Any, a: Any, dims: tuple[int, ...]) -> Any:
    """The sum of ``a`` over ``dims``, kept (size 1)."""
    for d in dims:
        a = b.sum_dim(a, d)
    return a


def _mean_over(b: Any, a: Any, dims: tuple[int, ...], count: int) -> Any:
    """The mean of ``a`` over ``dims`` (kept), ``count`` elements in all."""
    return _sum_over(b, a, dims) / count


def _normalized(b: Any, x: Any, dims: tuple[int, ...], eps: float, center: bool) -> tuple[Any, Any]:
    """(xhat, scale): ``xhat = (x - [mean]) * scale`` over ``dims``, scale = 1 / sqrt(ms + eps)
    with ``ms`` the biased variance (``center``) or the mean square."""
    n = math.prod(x.shape[d] for d in dims)
    xc = x - _mean_over(b, x, dims, n) if center else x
    scale = 1 / b.sqrt(_mean_over(b, xc * xc, dims, n) + eps)
    return xc * scale, scale


def _normalized_grad(
    b: Any, gxhat: Any, xhat: Any, scale: Any, dims: tuple[int, ...], center: bool
) -> Any:
    """The gradient of x from that of ``xhat`` (``_normalized``'s output):
    scale * (gxhat - [mean(gxhat)] - xhat * mean(gxhat * xhat)), means over ``dims``."""
    n = math.prod(xhat.shape[d] for d in dims)
    # the mean is taken off first, as ATen's batch norm backward: where the bracket cancels
    # to 0 (a uniform gradient), an inf weight in ``scale`` meets the same rounding residue
    gx = gxhat - _mean_over(b, gxhat, dims, n) if center else gxhat
    return (gx - xhat * _mean_over(b, gxhat * xhat, dims, n)) * scale


def _all_finite(b: Any, small: Any) -> bool:
    """Whether every element of ``small`` (a reduced tensor: one host read) is finite."""
    return math.isfinite(float(b.to_numpy_view(b.sum(small))))


def _layer_norm_grad(
    b: Any, gxhat: Any, x: Any, xhat: Any, rstd: Any, dims: tuple[int, ...]
) -> Any:
    """Layer norm's input gradient from that of ``xhat``. Finite row statistics: the centred
    form of ``_normalized_grad``. Otherwise (an inf weight or gradient: checked on the small
    reduced tensors) ATen's form ``rstd gxhat + k x + c``, whose NaN and inf positions PyTorch
    gives: ``k = (mean(gxhat) mean(x) - mean(gxhat x)) rstd^3``, ``c = -k mean(x) - mean(gxhat)
    rstd``; it costs one more pass over x."""
    n = math.prod(x.shape[d] for d in dims)
    m0 = _mean_over(b, gxhat, dims, n)
    m1 = _mean_over(b, gxhat * xhat, dims, n)
    if _all_finite(b, m0 + m1 + rstd):
        return (gxhat - xhat * m1 - m0) * rstd
    mean = _mean_over(b, x, dims, n)
    k = (m0 * mean - _mean_over(b, gxhat * x, dims, n)) * (rstd * rstd * rstd)
    c = -k * mean - m0 * rstd
    return gxhat * rstd + k * x + c


def _last_dims(x: Any, count: int) -> tuple[int, ...]:
    return tuple(range(x.ndim - count, x.ndim))


def _layer_norm_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 5)), n(size=(5,)), n(size=(5,))), {"normalized_ndim": 1, "eps": 1e-5}),
        ((n(size=(2, 3, 4)), n(size=(3, 4)), n(size=(3, 4))), {"normalized_ndim": 2, "eps": 1e-3}),
    ]


@defop(
    "layer_norm",
    precision=Precision.FULL,
    arity=3,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_layer_norm_examples,
    fused_backward="layer_norm_backward",
)
def layer_norm_backward(ctx: Any, grad: Any) -> Grads:
    x, w, _ = ctx.inputs
    a = ctx.attrs
    b = ctx.b
    # statistics are recomputed from x: no second saved set. The weight and bias gradients are
    # left broadcast over the leading dims: the engine sums them back to the weight's shape.
    dims = _last_dims(x, a["normalized_ndim"])
    xhat, rstd = _normalized(b, x, dims, a["eps"], center=True)
    gx = _layer_norm_grad(b, grad * w, x, xhat, rstd, dims) if _need(ctx, 0) else None
    gw = grad * xhat if _need(ctx, 1) else None
    return gx, gw, grad


def _rms_norm_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(3, 5)), n(size=(5,))), {"normalized_ndim": 1, "eps": 1e-6}),
        ((n(size=(2, 3, 4)), n(size=(3, 4))), {"normalized_ndim": 2, "eps": 1e-3}),
    ]


@defop(
    "rms_norm",
    arity=2,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_rms_norm_examples,
    precision=Precision.FULL,
)
def rms_norm_backward(ctx: Any, grad: Any) -> Grads:
    x, w = ctx.inputs
    a = ctx.attrs
    b = ctx.b
    dims = _last_dims(x, a["normalized_ndim"])
    xhat, scale = _normalized(b, x, dims, a["eps"], center=False)
    gx = _normalized_grad(b, grad * w, xhat, scale, dims, center=False) if _need(ctx, 0) else None
    return gx, (grad * xhat if _need(ctx, 1) else None)


def _batch_norm_examples(rng: Any) -> Examples:
    n = rng.normal
    return [
        ((n(size=(4, 3)), n(size=(3,)), n(size=(3,))), {"eps": 1e-5}),
        ((n(size=(2, 3, 4, 5)), n(size=(3,)), n(size=(3,))), {"eps": 1e-3}),
    ]


@defop(
    "batch_norm",
    precision=Precision.FULL,
    arity=3,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_batch_norm_examples,
    fused_backward="batch_norm_backward",
)
def batch_norm_backward(ctx: Any, grad: Any) -> Grads:
    # training form: statistics over every dim but 1 depend on x, so they are differentiated too
    x, w, _ = ctx.inputs
    b = ctx.b
    dims = (0, *range(2, x.ndim))
    channel = (1, -1) + (1,) * (x.ndim - 2)
    xhat, rstd = _normalized(b, x, dims, ctx.attrs["eps"], center=True)
    gx = gw = gb = None
    if _need(ctx, 0):
        # the weight is constant over ``dims``: it scales the result (with rstd, one small
        # factor), so an inf weight gives +-inf (NaN at a zero), as ATen's batch norm backward
        gx = _normalized_grad(b, grad, xhat, rstd * b.reshape(w, channel), dims, center=True)
    if _need(ctx, 1):
        gw = b.reshape(_sum_over(b, grad * xhat, dims), w.shape)
    if _need(ctx, 2):
        gb = b.reshape(_sum_over(b, grad, dims), w.shape)
    return gx, gw, gb


# ---------------------------------------------------------------- losses
def _xent_examples(rng: Any) -> Examples:
    x = rng.normal(size=(6, 5)) * 2
    y = rng.integers(0, 5, size=(6,))
    y2 = y.copy()
    y2[[1, 4]] = 3
    return [
        ((x, y), {"ignore_index": -100, "label_smoothing": 0.0}),
        ((x, y2), {"ignore_index": 3, "label_smoothing": 0.0}),
        (
            (rng.normal(size=(4, 3)), rng.integers(0, 3, size=(4,))),
            {"ignore_index": -100, "label_smoothing": 0.2},
        ),
    ]


@defop(
    "cross_entropy",
    arity=2,
    cost=CB,
    saves=Saves.INPUTS | Saves.RESIDUALS,
    examples=_xent_examples,
)
def cross_entropy_backward(ctx: Any, grad: Any) -> Grads:
    # output (R,): per-row loss; the residual logsumexp gives softmax = exp(x - lse)
    logits, target = ctx.inputs
    a = ctx.attrs
    gx = ctx.b.cross_entropy_backward(
        grad, logits, target, ctx.saved, a["ignore_index"], a["label_smoothing"]
    )
    return gx, None


def _xent_soft_examples(rng: Any) -> Examples:
    p = rng.uniform(0.1, 1.0, size=(4, 5))
    return [
        ((rng.normal(size=(4, 5)), p / p.sum(axis=1, keepdims=True)), {"label_smoothing": 0.0}),
        ((rng.normal(size=(3, 2)), rng.uniform(0.0, 1.0, size=(3, 2))), {"label_smoothing": 0.1}),
    ]


@defop(
    "cross_entropy_soft",
    arity=2,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_xent_soft_examples,
)
def cross_entropy_soft_backward(ctx: Any, grad: Any) -> Grads:
    logits, probs = ctx.inputs
    # d/dx = sum(t) softmax(x) - t;  d/dt = -(1 - eps) log_softmax(x)
    gx, gt = ctx.b.cross_entropy_soft_backward(grad, logits, probs, ctx.attrs["label_smoothing"])
    return (gx if _need(ctx, 0) else None), (gt if _need(ctx, 1) else None)


def _nll_examples(rng: Any) -> Examples:
    y = rng.integers(0, 4, size=(5,))
    y[2] = 1
    return [
        ((rng.normal(size=(5, 4)), y), {"ignore_index": -100}),
        ((rng.normal(size=(5, 4)), y), {"ignore_index": 1}),
    ]


@defop(
    "nll_loss",
    arity=2,
    cost=CB,
    saves=Saves.INPUTS,
    examples=_nll_examples,
    precision=Precision.FULL,
)
def nll_loss_backward(ctx: Any, grad: Any) -> Grads:
    _, target = ctx.inputs
    # -g at each row's target class, 0 elsewhere and on ignored rows
    num_classes = ctx.shapes[0][1]
    return ctx.b.nll_loss_backward(grad, target, num_classes, ctx.attrs["ignore_index"]), None


def _bce_examples(rng: Any) -> Examples:
    return [
        ((rng.uniform(0.05, 0.95, size=(3, 4)), rng.uniform(0.0, 1.0, size=(3, 4))), {}),
        ((rng.uniform(0.05, 0.95, size=(5,)), rng.integers(0, 2, size=(5,)).astype(float)), {}),
    ]


@defop(
    "binary_cross_entropy",
    precision=Precision.FULL,
    arity=2,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_bce_examples,
)
def binary_cross_entropy_backward(ctx: Any, grad: Any) -> Grads:
    p, t = ctx.inputs
    # d/dp = (p - t) / (p (1 - p));  d/dt = log(1 - p) - log(p)
    gp, gt = ctx.b.binary_cross_entropy_backward(grad, p, t)
    return (gp if _need(ctx, 0) else None), (gt if _need(ctx, 1) else None)


def _bce_logits_examples(rng: Any) -> Examples:
    n, u = rng.normal, rng.uniform
    return [
        ((n(size=(3, 4)) * 2, u(0.0, 1.0, size=(3, 4)), u(0.5, 2.0, size=(4,))), {}),
        ((n(size=(5,)), rng.integers(0, 2, size=(5,)).astype(float), u(0.5, 2.0, size=())), {}),
    ]


@defop(
    "binary_cross_entropy_with_logits",
    precision=Precision.FULL,
    arity=3,
    cost=MB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_bce_logits_examples,
)
def binary_cross_entropy_with_logits_backward(ctx: Any, grad: Any) -> Grads:
    x, t, w = ctx.inputs
    b = ctx.b
    # loss = w t softplus(-x) + (1 - t) softplus(x), with w the positive-class weight
    gx = gt = gw = None
    if _need(ctx, 0):
        wt = w * t
        # d/dx = sigmoid(x) (w t + 1 - t) - w t
        gx = grad * (b.sigmoid(x) * (wt + 1 - t) - wt)
    if _need(ctx, 1):
        gt = grad * (w * b.softplus(-x) - b.softplus(x))
    if _need(ctx, 2):
        gw = grad * t * b.softplus(-x)
    return gx, gt, gw


# ---------------------------------------------------------------- attention
def _attention_examples(rng: Any) -> Examples:
    n = rng.normal
    none = n(size=())
    keep = rng.integers(0, 2, size=(2, 3, 5)) * 2.0
    return [
        (
            (n(size=(2, 3, 4)), n(size=(2, 5, 4)), n(size=(2, 5, 3)), none, none),
            {"scale": 0.5, "is_causal": False},
        ),
        (
            (n(size=(2, 3, 4)), n(size=(2, 5, 4)), n(size=(2, 5, 3)), n(size=(3, 5)), keep),
            {"scale": 0.5, "is_causal": True},
        ),
        (
            (
                n(size=(1, 2, 4, 3)),
                n(size=(1, 2, 4, 3)),
                n(size=(1, 2, 4, 2)),
                n(size=(4, 4)),
                none,
            ),
            {"scale": 0.7, "is_causal": False},
        ),
    ]


@defop(
    "attention",
    precision=Precision.LOW,
    arity=5,
    cost=CB,
    saves=Saves.INPUTS,
    dtypes=F,
    examples=_attention_examples,
    fused_backward="attention_backward",
    flops=attention_flops,
)
def attention_backward(ctx: Any, grad: Any) -> Grads:
    q, k, v, bias, keep = ctx.inputs
    a = ctx.attrs
    b = ctx.b
    # the attention weights are recomputed from q, k and the bias instead of being kept; a 0-d
    # bias / keep mask is the row's "none" placeholder: its gradient is 0
    p = b.attention_weights(q, k, bias, a["scale"], a["is_causal"])
    masked = keep.ndim > 0
    gv = None
    gbias = b.zeros_like(bias) if not bias.ndim and _need(ctx, 3) else None
    gkeep = b.zeros_like(keep) if not masked and _need(ctx, 4) else None
    if _need(ctx, 2):
        gv = b.matmul((p * keep if masked else p).mT, grad)
    gp = b.matmul(grad, v.mT)
    if masked:
        if _need(ctx, 4):
            gkeep = gp * p
        gp = gp * keep
    # softmax backward: ds = p * (gp - sum(gp * p)); a fully masked row has p = 0 and gets 0
    gs = p * (gp - b.sum_dim(gp * p, p.ndim - 1))
    if bias.ndim and _need(ctx, 3):
        gbias = gs
    gs = gs * a["scale"]
    gq = b.matmul(gs, k) if _need(ctx, 0) else None
    gk = b.matmul(gs.mT, q) if _need(ctx, 1) else None
    # NumPy computes some half-precision products in float32: each gradient takes its input's dtype
    return tuple(_like(b, g, x) for g, x in zip((gq, gk, gv, gbias, gkeep), ctx.inputs))


@defop(
    "attention_dropout",
    precision=Precision.LOW,
    arity=3,
    cost=CB,
    saves=Saves.INPUTS | Saves.RESIDUALS,
    dtypes=F,
    flops=attention_flops,
    random=True,
)
def attention_dropout_backward(ctx: Any, grad: Any) -> Grads:
    # attention whose fused kernel drew its own dropout mask (CUDA's flash / cuDNN / efficient
    # kernels, from the backend's generator); the residuals name the mask (the kernel's random
    # seed and offset) and its backward draws it again: no other rule knows it
    q, k, v = ctx.inputs
    a = ctx.attrs
    grads = ctx.b.attention_dropout_backward(
        grad, q, k, v, ctx.saved, a["scale"], a["is_causal"], a["dropout_p"]
    )
    return tuple(g if _need(ctx, i) else None for i, g in enumerate(grads))


def _like(b: Any, g: Any, x: Any) -> Any:
    return g if g is None or g.dtype == x.dtype else b.cast(g, b.dtype_of(x))


# ---------------------------------------------------------------- embedding
def _embedding_examples(rng: Any) -> Examples:
    return [
        ((rng.integers(0, 6, size=(2, 3)), rng.normal(size=(6, 4))), {}),
        ((_repeat_indices(rng), rng.normal(size=(3, 2))), {}),
    ]


def _repeat_indices(rng: Any) -> Any:
    # repeated rows must sum their gradients
    idx = rng.integers(0, 3, size=(7,))
    idx[:3] = 1
    return idx


@defop("embedding", arity=2, cost=CB, saves=Saves.INPUTS, examples=_embedding_examples)
def embedding_backward(ctx: Any, grad: Any) -> Grads:
    indices, _ = ctx.inputs
    return None, ctx.b.embedding_backward(grad, indices, ctx.shapes[1][0])
