"""``F.linear_cross_entropy``: the vocabulary projection and the cross-entropy in one row.

``linear_cross_entropy(x, weight, target)`` equals ``cross_entropy(linear(x, weight, bias),
target)`` but never holds the (N, V) logits or their gradient: the row
(``ember/ops/linear_ce.py``) walks the vocabulary in chunks in its forward and again in its
backward, keeping only each row's logsumexp. On a language model's head this is the largest
activation of the step (two (tokens, vocab) arrays) gone.
"""

from __future__ import annotations

from typing import Any

from .._core import checks
from .._core.dispatch import apply
from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from .losses import (
    _class_target,
    _const,
    _float,
    _in_dtype,
    _index_range,
    _operands,
    _reduction,
    _tensor,
)

_ROW = OPS["linear_cross_entropy"]
_CHUNK_ELEMENTS = 1 << 25  # default chunk: about this many logits (64 MiB in bfloat16) at once


def default_chunk(rows: int, vocab: int) -> int:
    """Vocabulary columns per chunk: the whole vocabulary when ``rows * vocab`` is small."""
    return max(1, min(vocab, _CHUNK_ELEMENTS // max(rows, 1)))


def linear_cross_entropy(
    x: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Tensor | None = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    chunk: int | None = None,
) -> Tensor:
    """Cross-entropy of ``x @ weight.T + bias`` against class indices, without the logits.

    Args:
        x: Features (*, K), float.
        weight: (V, K) projection of the input's dtype (an LM head, or a tied embedding).
        target: int class indices of shape ``x.shape[:-1]``, in [0, V) or ``ignore_index``.
        bias: (V,) or None.
        ignore_index: Rows with this label add nothing and are left out of the mean.
        reduction: "mean" (over rows not ignored), "sum" or "none" (shape ``x.shape[:-1]``).
        label_smoothing: Mix the target with the uniform distribution: (1 - eps) t + eps / V.
        chunk: Vocabulary columns processed at once (default: about 32M logits per chunk);
            memory beyond the inputs is one (rows, chunk) block.

    Returns:
        The loss, as ``cross_entropy`` gives it (float32 for float16/bfloat16 inputs under
        ``ember.amp.autocast``, the inputs' dtype outside it).

    Example:
        >>> x = em.Tensor.zeros((2, 4))
        >>> round(linear_cross_entropy(x, em.Tensor.ones((3, 4)), em.tensor([0, 2])).item(), 4)
        1.0986
    """
    op = "linear_cross_entropy"
    x = _float(op, x)
    weight = _float(op, weight, "weight")
    target = _tensor(op, target, "target")
    _reduction(op, reduction)
    _operands(op, x, weight)
    _operands(op, x, target)
    if x.ndim < 1:
        raise ShapeError(
            f"{op}: expected x of shape (*, K), got a 0-d tensor. Hint: x.reshape((1, -1))."
        )
    if weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
        raise ShapeError(
            f"{op}: expected weight of shape (V, {x.shape[-1]}) for x {x.shape}, got "
            f"{weight.shape}. Hint: the weight is (vocab, features), as nn.Linear's."
        )
    if weight.dtype is not x.dtype:
        raise DTypeError(
            f"{op}: expected weight of the input's dtype {x.dtype.name}, got "
            f"{weight.dtype.name}. Cast it with .cast(x.dtype)."
        )
    _class_target(op, x, target)
    if target.shape != x.shape[:-1]:
        raise ShapeError(
            f"{op}: expected target of shape {x.shape[:-1]} (x's leading dims), got "
            f"{target.shape}. Hint: one class index per row of x."
        )
    vocab = weight.shape[0]
    if bias is None:
        b = _const(x, (), 0.0)
    else:
        b = _float(op, bias, "bias")
        _operands(op, x, b)
        if b.shape != (vocab,) or b.dtype is not x.dtype:
            raise ShapeError(
                f"{op}: expected bias of shape ({vocab},) and dtype {x.dtype.name}, got "
                f"{b.shape} {b.dtype.name}. Hint: bias=None for no bias."
            )
    label_smoothing = checks.float_arg(op, "label_smoothing", label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ShapeError(f"{op}: expected 0 <= label_smoothing <= 1, got {label_smoothing}.")
    ignore_index = checks.int_arg(op, "ignore_index", ignore_index, lo=-(1 << 63), hi=(1 << 63) - 1)
    rows = x.reshape((-1, x.shape[-1]))
    t = target.reshape((-1,))
    n = rows.shape[0]
    if chunk is None:
        chunk = default_chunk(n, vocab)
    else:
        chunk = checks.int_arg(op, "chunk", chunk, lo=1, hi=1 << 62)
    valid = _index_range(op, t, vocab, ignore_index)
    attrs: dict[str, Any] = {
        "ignore_index": int(ignore_index),
        "label_smoothing": float(label_smoothing),
        "chunk": int(chunk),
    }
    loss = apply(_ROW, (rows, weight, b, t), attrs)
    if reduction == "none":
        return _in_dtype(loss.reshape(target.shape), x)
    total = loss.sum()
    if reduction == "sum":
        return _in_dtype(total, x)
    if valid is None:  # counted on the device: 0 valid rows give 0 / 0 = NaN
        return _in_dtype(total / (t != ignore_index).cast(total.dtype).sum(), x)
    return _in_dtype(total / valid if valid else total * float("nan"), x)
