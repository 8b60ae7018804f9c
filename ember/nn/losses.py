"""Loss functions of ``em.nn.functional`` (PyTorch's argument conventions).

Cross-entropy, NLL and the binary cross-entropies are fused registry rows (``ember/ops/nn.py``)
giving per-element or per-row losses; the reduction ("mean", "sum" or "none") is applied here.
Class-index targets are checked to lie in [0, C) (or equal ``ignore_index``) before any kernel
runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._core import checks
from .._core.dispatch import apply
from .._core.tensor import Tensor
from ..amp import current_policy
from ..errors import DTypeError, ShapeError
from ..ops import OPS

if TYPE_CHECKING:
    from .._core.device import Device
    from ..dtype import DType

_REDUCTIONS = ("mean", "sum", "none")


# ---------------------------------------------------------------- shared argument checks
def _tensor(op: str, x: Any, what: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        if getattr(x, "is_quantized", None) is not None:  # a QuantizedTensor
            raise DTypeError(
                f"{op}: expected {what} to be a float tensor, got a quantized one; only "
                "matmul, F.linear and F.embedding take quantized weights. Call "
                "q.dequantize() first."
            )
        raise DTypeError(
            f"{op}: expected {what} to be an em.Tensor, got {type(x).__name__}. "
            "Wrap data with em.tensor(...)."
        )
    return x


def _float(op: str, x: Any, what: str = "input") -> Tensor:
    if type(x) is Tensor:  # the common case, without properties
        dt = x._raw.dtype
        if dt in _FLOAT_DTYPES:
            return x
        if x._hardware.b.is_float(x._raw):
            _FLOAT_DTYPES.add(dt)
            return x
    t = _tensor(op, x, what)
    if not t.dtype.is_float:
        raise DTypeError(
            f"{op}: expected {what} to be a float tensor, got {t.dtype.name}. "
            "Convert it with .float()."
        )
    return t


def _const(like: Tensor, shape: tuple[int, ...], value: float) -> Tensor:
    """A plain constant on ``like``'s hardware (joins the op as an untracked input).

    Scalars and vectors (the defaults of bias-less layers, attention and pos_weight) are made
    once per device, dtype, shape and value: tensors are immutable, so one constant serves every
    call, and a step launches no fill for them.
    """
    if len(shape) > 1 or value != value:
        return Tensor.full(shape, value, device=like.device.without_autodiff(), dtype=like.dtype)
    key = (like._hardware, like.dtype, shape, value)
    t = _CONSTANTS.get(key)
    if t is None:
        t = Tensor.full(shape, value, device=like.device.without_autodiff(), dtype=like.dtype)
        _CONSTANTS[key] = t
    return t


_CONSTANTS: dict[tuple[Device, DType, tuple[int, ...], float], Tensor] = {}
# the backends' float storage dtypes met so far (whether a dtype is float depends on it alone):
# a set lookup is much cheaper than asking the backend on every call
_FLOAT_DTYPES: set[Any] = set()


def _index_range(op: str, indices: Tensor, n: int, ignore_index: int | None) -> int | None:
    """Check int ``indices`` lie in [0, n) (``ignore_index`` allowed); returns how many of them
    are not ``ignore_index``.

    On a CUDA device reading the indices back would stall every training step, so the check is
    left to the kernels (a device-side assert) and ``None`` is returned.
    """
    dev = indices._hardware
    if dev.is_cuda:
        return None
    a = dev.b.to_numpy_view(indices._raw)  # only read here: no copy needed
    if not a.size:
        return 0
    lo, hi = int(a.min()), int(a.max())
    if lo >= 0 and hi < n:  # the common case: two reductions instead of masks over every value
        if ignore_index is None or not lo <= ignore_index <= hi:
            return int(a.size)
        return int(np.count_nonzero(a != ignore_index))
    bad = (a < 0) | (a >= n)
    if ignore_index is not None:
        bad &= a != ignore_index
    if bad.any():
        v = int(a[bad].reshape(-1)[0])
        extra = f" (or ignore_index={ignore_index})" if ignore_index is not None else ""
        raise ShapeError(
            f"{op}: index {v} is out of range; expected values in [0, {n}){extra}. "
            "Check the labels or the number of classes / embeddings."
        )
    return int(a.size) if ignore_index is None else int(np.count_nonzero(a != ignore_index))


def _reduction(op: str, reduction: str) -> str:
    if reduction not in _REDUCTIONS:
        raise ShapeError(f"{op}: expected reduction 'mean', 'sum' or 'none', got {reduction!r}.")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _in_dtype(loss: Tensor, x: Tensor) -> Tensor:
    """The reduced ``loss`` in ``x``'s dtype outside ``autocast``; float32 inside.

    The cross-entropy rows return float32 for float16/bfloat16 logits (they compute in float32):
    without a mixed-precision policy the loss keeps the logits' dtype, as every other op does.
    """
    if loss.dtype is x.dtype or current_policy() is not None:
        return loss
    return loss.cast(x.dtype)


def _operands(op: str, x: Tensor, other: Tensor) -> None:
    """Same device and, for two autodiff tensors, one strategy (errors that name ``op``)."""
    if other._hardware is not x._hardware:
        checks.same_device(op, x._hardware, other._hardware)
    sx, so = x._ckpt_strategy, other._ckpt_strategy
    if sx is not None and so is not None and sx is not so:
        raise checks.same_strategy(op, sx, so)


def _like(op: str, x: Tensor, target: Any) -> Tensor:
    """``target`` as a float tensor of ``x``'s dtype, broadcastable to ``x``."""
    t = _tensor(op, target, "target")
    _operands(op, x, t)
    if t.dtype is not x.dtype:
        t = t.cast(x.dtype)
    checks.broadcast_shapes(op, x.shape, t.shape)
    return t


def _same_shape(op: str, x: Tensor, t: Tensor) -> None:
    if t.shape != x.shape:
        raise ShapeError(f"{op}: expected a target of the input's shape {x.shape}, got {t.shape}.")


# ---------------------------------------------------------------- class-index losses
def _rows(op: str, x: Tensor, target: Tensor, soft: bool) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    """Flatten (N, C, d1, ...) scores to (R, C) rows (class dim last) and the target to match.

    Returns the rows, the flattened target, and the per-row output shape (N, d1, ...).
    """
    shape = x.shape
    ndim = len(shape)
    if ndim == 0:
        raise ShapeError(f"{op}: expected input (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor.")
    if ndim == 1:
        return x.unsqueeze_dim(0), target.unsqueeze_dim(0), ()
    c = shape[1]
    out_shape = (shape[0], *shape[2:])
    want = shape if soft else out_shape
    if target.shape != want:
        kind = "class probabilities" if soft else "class indices"
        raise ShapeError(
            f"{op}: expected {kind} of shape {want} for input {shape}, got target {target.shape}."
        )
    if ndim == 2:
        return x, target, out_shape
    # (N, C, d1, ...) -> (N, d1, ..., C) -> (R, C)
    dims = (0, *range(2, ndim), 1)
    rows = x.permute(dims).reshape((-1, c))
    t = target.permute(dims).reshape((-1, c)) if soft else target.reshape((-1,))
    return rows, t, out_shape


def _class_target(op: str, x: Tensor, target: Tensor) -> None:
    if target.dtype.is_bool:
        raise DTypeError(
            f"{op}: expected int class indices, got a bool target. Convert with .int()."
        )
    if target.dtype.is_float:
        raise DTypeError(
            f"{op}: expected int class indices, got a {target.dtype.name} target of shape "
            f"{target.shape} (input {x.shape}). Convert labels with .int(); float targets are "
            "only accepted as class probabilities of the input's shape (cross_entropy)."
        )


def _index_loss(
    op: str,
    row: str,
    x: Tensor,
    target: Tensor,
    ignore_index: int,
    reduction: str,
    attrs: dict[str, Any],
) -> Tensor:
    rows, t, out_shape = _rows(op, x, target, soft=False)
    ignore_index = checks.int_arg(op, "ignore_index", ignore_index, lo=-(1 << 63), hi=(1 << 63) - 1)
    valid = _index_range(op, t, rows._raw.shape[1], ignore_index)
    loss = apply(OPS[row], (rows, t), {"ignore_index": int(ignore_index), **attrs})
    if reduction == "none":
        return _in_dtype(loss.reshape(out_shape), x)
    total = loss.sum()
    if reduction == "sum":
        return _in_dtype(total, x)
    # the mean runs over the rows that are not ignored (NaN when every row is)
    if valid is None:  # counted on the device: 0 valid rows give 0 / 0 = NaN
        return _in_dtype(total / (t != ignore_index).cast(total.dtype).sum(), x)
    return _in_dtype(total / valid if valid else total * float("nan"), x)


def _class_weight(op: str, x: Tensor, weight: Any) -> Tensor:
    """``weight`` as a (C,) tensor of ``x``'s dtype on ``x``'s device."""
    w = _float(op, weight, "weight")
    c = x.shape[0] if len(x.shape) == 1 else x.shape[1]
    if w.shape != (c,):
        raise ShapeError(
            f"{op}: expected a per-class weight of shape ({c},) for input {x.shape}, got "
            f"{w.shape}. Pass one float per class."
        )
    _operands(op, x, w)
    return w if w.dtype is x.dtype else w.cast(x.dtype)


def _weighted_index_loss(
    op: str,
    logp: Tensor,
    target: Tensor,
    w: Tensor,
    ignore_index: int,
    reduction: str,
    eps: float,
) -> Tensor:
    """PyTorch's class-weighted NLL of (R, C) log-probabilities, composed from tensor ops.

    Per row: (1 - eps) w[y] (-logp[y]) + eps / C sum_c w_c (-logp[c]), 0 on ignored rows;
    "mean" divides the sum by sum of w[y] over rows that are not ignored.
    """
    c = logp.shape[1]
    classes = Tensor.arange(c, device=target.device.without_autodiff())
    hot = (target.unsqueeze_dim(1) == classes).cast(logp.dtype)
    keep = (target != ignore_index).cast(logp.dtype)
    wy = (hot * w).sum(1) * keep
    loss = -(hot * w * logp).sum(1) * keep
    if eps:
        loss = loss * (1.0 - eps) - (w * logp).sum(1) * keep * (eps / c)
    if reduction == "mean":
        return loss.sum() / wy.sum()
    return loss


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy of unnormalised scores against class indices or class probabilities.

    One fused row (log-softmax, pick, smoothing; backward softmax - target). float16/bfloat16
    scores are read directly and the loss is computed in float32: it is float32 under
    ``ember.amp.autocast`` and cast back to the scores' dtype outside it.

    Args:
        input: Scores (N, C), (C,) or (N, C, d1, ...).
        target: int class indices (N,), () or (N, d1, ...) with values in [0, C) or equal to
            ``ignore_index``; or float class probabilities of the input's shape.
        ignore_index: Rows with this label add nothing and are left out of the mean.
        reduction: "mean", "sum" or "none" (then shape (N,) or (N, d1, ...)).
        label_smoothing: Mix the target with the uniform distribution: (1 - eps) t + eps / C.
        weight: Per-class float weights (C,), or None. As PyTorch: each class's term is scaled
            by its weight, and "mean" over class indices divides by the sum of w[target] over
            the rows not ignored (over probabilities, by the row count). Composed from tensor
            ops (the fused row runs when weight is None).

    Example:
        >>> round(cross_entropy(em.Tensor.zeros((2, 3)), em.tensor([0, 2])).item(), 4)
        1.0986
    """
    op = "cross_entropy"
    x = _float(op, input)
    target = _tensor(op, target, "target")
    _reduction(op, reduction)
    label_smoothing = checks.float_arg(op, "label_smoothing", label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ShapeError(f"{op}: expected 0 <= label_smoothing <= 1, got {label_smoothing}.")
    w = None if weight is None else _class_weight(op, x, weight)
    if target.dtype.is_float and target.shape == x.shape:
        t = target if target.dtype is x.dtype else target.cast(x.dtype)
        rows, tr, out_shape = _rows(op, x, t, soft=True)
        if w is not None:
            c = rows.shape[1]
            smooth = tr * (1.0 - label_smoothing) + label_smoothing / c
            loss = -(smooth * w * _log_softmax(rows)).sum(1)
            return _in_dtype(_reduce(loss.reshape(out_shape), reduction), x)
        loss = apply(OPS["cross_entropy_soft"], (rows, tr), {"label_smoothing": label_smoothing})
        return _in_dtype(_reduce(loss.reshape(out_shape), reduction), x)
    _class_target(op, x, target)
    if w is not None:
        return _class_weighted(op, x, target, w, ignore_index, reduction, label_smoothing, True)
    attrs = {"label_smoothing": float(label_smoothing)}
    return _index_loss(op, "cross_entropy", x, target, ignore_index, reduction, attrs)


def _log_softmax(rows: Tensor) -> Tensor:
    from .functional import log_softmax  # functional imports this module

    return log_softmax(rows, 1)


def _class_weighted(
    op: str,
    x: Tensor,
    target: Tensor,
    w: Tensor,
    ignore_index: int,
    reduction: str,
    eps: float,
    scores: bool,
) -> Tensor:
    """The class-weighted loss of index targets (``scores``: x holds logits, not log-probs)."""
    rows, t, out_shape = _rows(op, x, target, soft=False)
    ignore_index = checks.int_arg(op, "ignore_index", ignore_index, lo=-(1 << 63), hi=(1 << 63) - 1)
    valid = _index_range(op, t, rows.shape[1], ignore_index)
    logp = _log_softmax(rows) if scores else rows
    if valid == 0 and reduction == "mean":  # every row ignored: NaN, zero gradients (PyTorch)
        return _in_dtype(
            _weighted_index_loss(op, logp, t, w, ignore_index, "sum", eps).sum() * 0.0
            + float("nan"),
            x,
        )
    loss = _weighted_index_loss(op, logp, t, w, ignore_index, reduction, eps)
    if reduction == "none":
        return _in_dtype(loss.reshape(out_shape), x)
    return _in_dtype(loss if reduction == "mean" else loss.sum(), x)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood: -input[i, target[i]] from log-probabilities (N, C) or
    (N, C, d1, ...) and int class indices (N,) or (N, d1, ...); ``weight`` (C,) scales each
    class's term and "mean" divides by the sum of w[target] over rows not ignored (PyTorch)."""
    op = "nll_loss"
    x = _float(op, input)
    target = _tensor(op, target, "target")
    _reduction(op, reduction)
    _class_target(op, x, target)
    if weight is not None:
        w = _class_weight(op, x, weight)
        return _class_weighted(op, x, target, w, ignore_index, reduction, 0.0, False)
    return _index_loss(op, "nll_loss", x, target, ignore_index, reduction, {})


# ---------------------------------------------------------------- regression losses
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error (input - target)^2, reduced."""
    op = "mse_loss"
    x = _float(op, input)
    _reduction(op, reduction)
    d = x - _like(op, x, target)
    return _reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error |input - target|, reduced."""
    op = "l1_loss"
    x = _float(op, input)
    _reduction(op, reduction)
    return _reduce((x - _like(op, x, target)).abs(), reduction)


def smooth_l1_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta, with d = input - target."""
    op = "smooth_l1_loss"
    x = _float(op, input)
    _reduction(op, reduction)
    beta = checks.float_arg(op, "beta", beta)
    if not beta >= 0:
        raise ShapeError(f"{op}: expected beta >= 0, got {beta}.")
    d = x - _like(op, x, target)
    ad = d.abs()
    if beta == 0:
        return _reduce(ad, reduction)
    quad = d * d * (0.5 / beta)
    return _reduce((ad - 0.5 * beta).mask_where(ad < beta, quad), reduction)


def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0
) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); = delta * smooth_l1(beta=delta)."""
    op = "huber_loss"
    x = _float(op, input)
    _reduction(op, reduction)
    delta = checks.float_arg(op, "delta", delta)
    if not delta > 0:
        raise ShapeError(f"{op}: expected delta > 0, got {delta}.")
    d = x - _like(op, x, target)
    ad = d.abs()
    lin = (ad - 0.5 * delta) * delta
    return _reduce(lin.mask_where(ad < delta, d * d * 0.5), reduction)


# ---------------------------------------------------------------- binary cross-entropy
def _weighted(loss: Tensor, weight: Tensor | None, op: str) -> Tensor:
    if weight is None:
        return loss
    w = _like(op, loss, weight)
    return loss * w


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """-w (t log p + (1 - t) log(1 - p)) for probabilities p in [0, 1]; logs clamped at -100.

    Args:
        input: Probabilities p, any shape.
        target: Same shape, values in [0, 1].
        weight: Broadcastable rescaling weight, or None.

    Raises:
        ShapeError: for probabilities outside [0, 1] (not checked on CUDA devices, where the
            check would read the input back and stall the step).
    """
    op = "binary_cross_entropy"
    p = _float(op, input)
    _reduction(op, reduction)
    t = _like(op, p, target)
    _same_shape(op, p, t)
    # reading the probabilities back would stall a CUDA step: there the kernel's clamped logs
    # run unchecked (out-of-range inputs give NaN), as with the class-index checks
    a = None if p.device.is_cuda else p.to_numpy()
    if a is not None and a.size and not (float(np.min(a)) >= 0.0 and float(np.max(a)) <= 1.0):
        raise ShapeError(
            f"{op}: expected input probabilities in [0, 1], got values in "
            f"[{float(np.min(a)):.4g}, {float(np.max(a)):.4g}]. Apply sigmoid first, or use "
            "binary_cross_entropy_with_logits."
        )
    loss = apply(OPS["binary_cross_entropy"], (p, t), {})
    return _reduce(_weighted(loss, weight, op), reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of sigmoid(input), computed stably from the logits in one row.

    Args:
        input: Logits x, any shape.
        target: Same shape, values in [0, 1].
        weight: Broadcastable rescaling weight, or None.
        pos_weight: Weight of the positive class, broadcastable to the input (e.g. (C,)).
    """
    op = "binary_cross_entropy_with_logits"
    x = _float(op, input)
    _reduction(op, reduction)
    t = _like(op, x, target)
    _same_shape(op, x, t)
    pw = _const(x, (), 1.0) if pos_weight is None else _like(op, x, pos_weight)
    loss = apply(OPS["binary_cross_entropy_with_logits"], (x, t, pw), {})
    return _reduce(_weighted(loss, weight, op), reduction)
