"""``em.nn.functional``: activations, convolution, pooling, normalisation, attention and losses.

Functions take PyTorch's argument conventions (``torch.nn.functional``), check their arguments
(rank, sizes, dtypes, ranges) and dispatch to one registry row each: the fused kernels of
``ember/ops/nn.py``, ``conv.py`` and ``activations.py``. Tensors are immutable, so
``batch_norm`` returns its updated running statistics instead of writing them in place. Losses
live in ``ember.nn.losses`` and are re-exported here.

Example:
    >>> import ember as em
    >>> from ember.nn import functional as F
    >>> x = em.tensor([[1.0, -2.0, 3.0]])
    >>> F.relu(x).tolist()
    [[1.0, 0.0, 3.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core import checks
from .._core import qops as _qops
from .._core.creation import Distribution
from .._core.dispatch import apply, autocast_policy, unify
from .._core.internal import from_raw
from .._core.quantized import QuantizedTensor
from .._core.tensor import Tensor
from ..errors import DTypeError, ShapeError
from ..ops import OPS

if TYPE_CHECKING:
    from .._generator import Generator
from .activations import elu, hardsigmoid, hardswish, leaky_relu, mish, softplus
from .instance_norm import instance_norm
from .linear_ce import linear_cross_entropy
from .losses import (
    _FLOAT_DTYPES,
    _const,
    _float,
    _index_range,
    _operands,
    _tensor,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .pooling import (
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
    max_unpool1d,
    max_unpool2d,
)
from .resample import interpolate, pad, pixel_shuffle, pixel_unshuffle
from .spatial_args import IntOrPair, Pair, _batched, _pair

# attrs that are the same on every call, shared by the nodes they are recorded on (which never
# modify them)
_NO_ATTRS: dict[str, Any] = {}
_GELU_ATTRS = {"none": {"approximate": "none"}, "tanh": {"approximate": "tanh"}}
_LINEAR, _LAYER_NORM, _ATTENTION = OPS["linear"], OPS["layer_norm"], OPS["attention"]
_ATTENTION_DROPOUT = OPS["attention_dropout"]

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "hardsigmoid",
    "hardswish",
    "huber_loss",
    "interpolate",
    "instance_norm",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "linear_cross_entropy",
    "log_softmax",
    "max_pool1d",
    "max_pool2d",
    "max_unpool1d",
    "max_unpool2d",
    "mish",
    "mse_loss",
    "nll_loss",
    "pad",
    "pixel_shuffle",
    "pixel_unshuffle",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
]

_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}


# ---------------------------------------------------------------- argument helpers
def _same_dtype(op: str, x: Tensor, other: Tensor, what: str) -> None:
    if other.dtype is not x.dtype:
        if x.dtype.is_float and other.dtype.is_float and autocast_policy() is not None:
            return  # autocast picks the dtype of these (LOW or FULL) rows: a bf16 activation
            # meets a float32 weight after the first layer
        raise DTypeError(
            f"{op}: expected {what} of the input's dtype {x.dtype.name}, got "
            f"{other.dtype.name}. Cast it with .cast(input.dtype)."
        )


def _none_operand(like: Tensor) -> Tensor:
    """The 0-d zero that tells the attention and linear rows "no bias / no keep mask"."""
    return _const(like, (), 0.0)


def _conv_operands(
    op: str, x: Tensor, weight: Tensor, n: int, x_layout: str, w_layout: str
) -> tuple[Tensor, Tensor, bool]:
    """Check an ``n``-D convolution's float input (batched or not) and weight of its dtype.

    Returns the input with a batch dim, the weight, and whether a batch dim was added.
    """
    x, unbatched = _batched(op, x, n, x_layout)
    weight = _float(op, weight, "weight")
    if weight.ndim != n + 2:
        raise ShapeError(f"{op}: expected a {n + 2}-D weight {w_layout}, got shape {weight.shape}.")
    _same_dtype(op, x, weight, "weight")
    return x, weight, unbatched


def _check_span(op: str, size: Pair, kernel: Pair, pad: Pair, dil: Pair) -> None:
    """The (dilated) kernel fits the padded input along both spatial dims."""
    for i in range(2):
        span = dil[i] * (kernel[i] - 1) + 1
        if span > size[i] + 2 * pad[i]:
            raise ShapeError(
                f"{op}: kernel (size {kernel}, dilation {dil}) spans {span} along spatial dim "
                f"{i}, larger than the padded input ({size[i]} + 2*{pad[i]}). Use a smaller "
                "kernel or more padding."
            )


# ---------------------------------------------------------------- activations
def relu(x: Tensor) -> Tensor:
    """max(x, 0) elementwise; the gradient is 1 where the output is positive, else 0.

    Example:
        >>> relu(em.tensor([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    return apply(OPS["relu"], (_float("relu", x),), _NO_ATTRS)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit: x Phi(x), or its tanh approximation (``approximate="tanh"``).

    Example:
        >>> round(gelu(em.tensor([1.0])).item(), 4)
        0.8413
    """
    if approximate == "tanh":
        attrs = _GELU_ATTRS["tanh"]
    elif approximate == "none":
        attrs = _GELU_ATTRS["none"]
    else:
        raise ShapeError(f"gelu: expected approximate 'none' or 'tanh', got {approximate!r}.")
    return apply(OPS["gelu"], (_float("gelu", x),), attrs)


def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    return apply(OPS["silu"], (_float("silu", x),), _NO_ATTRS)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x)) elementwise."""
    return apply(OPS["sigmoid"], (_float("sigmoid", x),), _NO_ATTRS)


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent elementwise (same as ``x.tanh()``)."""
    return _float("tanh", x).tanh()


def _softmax_like(op: str, x: Tensor, dim: int) -> Tensor:
    x = _float(op, x)
    if x.ndim == 0:
        return _softmax_like(op, x.reshape((1,)), 0).reshape(())
    return apply(OPS[op], (x,), {"dim": checks.dim(op, dim, x.ndim)})


def softmax(x: Tensor, dim: int) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``: one fused, numerically stable row.

    Example:
        >>> softmax(em.tensor([0.0, 0.0]), dim=0).tolist()
        [0.5, 0.5]
    """
    return _softmax_like("softmax", x, dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """x - logsumexp(x) along ``dim``: one fused, numerically stable row."""
    return _softmax_like("log_softmax", x, dim)


def dropout(
    x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None
) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p).

    The mask is a random tensor created before the multiply (``Tensor.random`` with
    ``Distribution.bernoulli(1 - p)``), never drawn inside a forward, so gradient checkpointing
    recomputes exactly. It comes from ``generator`` (an ``em.Generator``) or, by default, the
    device's default generator. Returns ``x`` itself when not ``training`` or when ``p`` is 0.
    """
    x = _float("dropout", x)
    if type(p) is not float:
        p = checks.float_arg("dropout", "p (a probability)", p)
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout: expected a probability 0 <= p <= 1, got {p}.")
    if type(training) is not bool:
        raise DTypeError(f"dropout: expected training to be a bool, got {checks.show(training)}.")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = Tensor.random(
        x.shape,
        Distribution.bernoulli(1.0 - p),
        device=x.device,
        dtype=x.dtype,
        generator=generator,
    )
    return x * (keep * (1.0 / (1.0 - p)))


# ---------------------------------------------------------------- linear and embedding
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias.

    Args:
        x: Input of shape (*, in_features).
        weight: Shape (out_features, in_features).
        bias: Shape (out_features,), or None.

    Returns:
        Shape (*, out_features).
    """
    if type(x) is Tensor and type(weight) is Tensor:
        # the common case (float operands of one dtype and matching sizes), read off the raw
        # arrays; anything else takes the checks below, which raise the errors
        xd, wd = x._raw, weight._raw
        dt = xd.dtype
        if (
            dt in _FLOAT_DTYPES
            and wd.dtype == dt
            and wd.ndim == 2
            and xd.ndim
            and xd.shape[-1] == wd.shape[1]
        ):
            if bias is None:
                return apply(_LINEAR, (x, weight, _none_operand(x)), _NO_ATTRS)
            if type(bias) is Tensor:
                bd = bias._raw
                if bd.dtype == dt and bd.ndim == 1 and bd.shape[0] == wd.shape[0]:
                    return apply(_LINEAR, (x, weight, bias), _NO_ATTRS)
    return _linear_checked(x, weight, bias)


def _linear_checked(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    if isinstance(weight, QuantizedTensor) or isinstance(x, QuantizedTensor):
        return _qops.linear(x, weight, bias)  # int8 values (ember/_core/qops.py)
    x = _float("linear", x)
    weight = _float("linear", weight, "weight")
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: expected weight (out_features, in_features) with in_features = the "
            f"input's last size, got input {x.shape} and weight {weight.shape}. The weight is "
            "[out, in], as in PyTorch."
        )
    spec = _LINEAR
    if bias is not None:
        bias = _float("linear", bias, "bias")
        if bias.shape != (weight.shape[0],):
            raise ShapeError(
                f"linear: expected bias of shape ({weight.shape[0]},), got {bias.shape}."
            )
        if x._raw.dtype == weight._raw.dtype == bias._raw.dtype:
            # one fused row (addmm on torch): a single op to dispatch and record
            return apply(spec, (x, weight, bias), _NO_ATTRS)
        _operands("linear", x, bias)
        _operands("linear", x, weight)
        return apply(spec, unify(spec, (x, weight, bias)), _NO_ATTRS)
    if x._raw.dtype != weight._raw.dtype:
        _operands("linear", x, weight)
        x, weight = unify(spec, (x, weight))
    # the fused row without a bias: a 0-d operand means none
    return apply(spec, (x, weight, _none_operand(x)), _NO_ATTRS)


def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (num_embeddings, D) picked by int ``indices`` of any shape -> (*, D).

    Example:
        >>> w = em.tensor([[0.0, 1.0], [2.0, 3.0]])
        >>> embedding(em.tensor([1, 1, 0]), w).tolist()
        [[2.0, 3.0], [2.0, 3.0], [0.0, 1.0]]
    """
    if isinstance(weight, QuantizedTensor):
        return _qops.embedding(indices, weight)  # the picked rows, dequantized
    indices = _tensor("embedding", indices, "indices")
    weight = _float("embedding", weight, "weight")
    dt = indices.dtype
    if dt.is_float or dt.is_bool:
        raise DTypeError(f"embedding: expected int indices, got {dt.name}. Convert with .int().")
    wd = weight._raw
    if wd.ndim != 2:
        raise ShapeError(
            f"embedding: expected a 2-D weight (num_embeddings, dim), got shape {weight.shape}."
        )
    _index_range("embedding", indices, wd.shape[0], None)
    return apply(OPS["embedding"], (indices, weight), _NO_ATTRS)


# ---------------------------------------------------------------- convolution
def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair | str = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``.

    Args:
        x: Input (N, C, H, W), or (C, H, W) unbatched.
        weight: (O, C / groups, kh, kw).
        bias: (O,), or None.
        stride, padding, dilation: An int or a pair; padding may also be "valid" or "same"
            ("same" needs stride 1; an odd dilation * (k - 1) pads one more row / column at
            the bottom / right, as PyTorch).
        groups: Input and output channels split into this many independent groups.

    Returns:
        (N, O, Ho, Wo) with Ho = (H + 2 padding - dilation (kh - 1) - 1) // stride + 1.
    """
    op = "conv2d"
    x, weight, unbatched = _conv_operands(
        op, x, weight, 2, "(N, C, H, W)", "(out_channels, in_channels / groups, kh, kw)"
    )
    st = _pair(op, "stride", stride, 1)
    dil = _pair(op, "dilation", dilation, 1)
    kernel = (weight.shape[2], weight.shape[3])
    pad = _conv_padding(op, padding, kernel, st, dil)
    extra = _same_extra(padding, kernel, dil)
    if extra != (0, 0):
        x = _pad_input(x, (0, extra[1], 0, extra[0]))
    groups = _check_groups(op, x.shape[1], weight.shape[0], weight.shape[1], groups)
    _check_span(op, (x.shape[2], x.shape[3]), kernel, pad, dil)
    b = _conv_bias(op, x, bias, weight.shape[0])
    _check_output(op, x, weight.shape[0], kernel, st, pad, dil)
    attrs = {"stride": st, "padding": pad, "dilation": dil, "groups": groups}
    out = apply(OPS["conv2d"], (x, weight, b), attrs)
    return out.squeeze_dim(0) if unbatched else out


def _conv_padding(op: str, padding: Any, kernel: Pair, stride: Pair, dil: Pair) -> Pair:
    if not isinstance(padding, str):
        return _pair(op, "padding", padding, 0)
    if padding == "valid":
        return (0, 0)
    if padding == "same":
        total = (dil[0] * (kernel[0] - 1), dil[1] * (kernel[1] - 1))
        if stride != (1, 1):
            raise ShapeError(
                f"{op}: padding='same' needs stride 1, got stride {stride} (kernel {kernel}, "
                f"dilation {dil}). Pad explicitly instead."
            )
        return (total[0] // 2, total[1] // 2)
    raise ShapeError(f"{op}: expected padding 'valid', 'same', an int or a pair, got {padding!r}.")


_pad_input = pad  # F.pad, under a name the conv functions' local ``pad`` does not shadow


def _same_extra(padding: Any, kernel: Pair, dil: Pair) -> Pair:
    """The one extra bottom / right row of padding='same' with an odd total (as PyTorch)."""
    if padding != "same":
        return (0, 0)
    return (dil[0] * (kernel[0] - 1) % 2, dil[1] * (kernel[1] - 1) % 2)


def _check_output(
    op: str, x: Tensor, channels: int, kernel: Pair, st: Pair, pad: Pair, dil: Pair
) -> None:
    """Refuse a convolution output no memory holds (a huge padding), before the kernel runs."""
    n, _, h, w = x.shape
    ho = (h + 2 * pad[0] - dil[0] * (kernel[0] - 1) - 1) // st[0] + 1
    wo = (w + 2 * pad[1] - dil[1] * (kernel[1] - 1) - 1) // st[1] + 1
    checks.alloc(op, (n, channels, ho, wo), x.dtype)


def _check_groups(op: str, c_in: int, c_out: int, c_per_group: int, groups: int) -> int:
    groups = checks.int_arg(op, "groups", groups, lo=1)
    if c_in != c_per_group * groups or c_out % groups:
        raise ShapeError(
            f"{op}: channels don't fit groups={groups}: input has {c_in} channels, weight "
            f"expects {c_per_group} per group ({c_per_group * groups} in all) and has {c_out} "
            "outputs (must divide by groups). Check the weight's in_channels / groups."
        )
    return groups


def _conv_bias(op: str, x: Tensor, bias: Tensor | None, channels: int) -> Tensor:
    if bias is None:
        return _const(x, (channels,), 0.0)
    bias = _float(op, bias, "bias")
    if bias.shape != (channels,):
        raise ShapeError(f"{op}: expected bias of shape ({channels},), got {bias.shape}.")
    _same_dtype(op, x, bias, "bias")
    return bias


def conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int | str = 0,
    dilation: int = 1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation: x (N, C, L) or (C, L), weight (O, C / groups, k) -> (N, O, Lo).

    Runs as ``conv2d`` on a height-1 image.
    """
    op = "conv1d"
    x, weight, unbatched = _conv_operands(
        op, x, weight, 1, "(N, C, L)", "(out_channels, in_channels / groups, k)"
    )
    _operands(op, x, weight)
    st = _pair(op, "stride", stride, 1)[0]
    dil = _pair(op, "dilation", dilation, 1)[0]
    pad = padding if isinstance(padding, str) else (0, _pair(op, "padding", padding, 0)[0])
    # checked here, then the conv2d row runs directly, so that errors name conv1d
    groups = _check_groups(op, x.shape[1], weight.shape[0], weight.shape[1], groups)
    p1 = _conv_padding(op, pad, (1, weight.shape[2]), (1, st), (1, dil))
    if _same_extra(pad, (1, weight.shape[2]), (1, dil))[1]:
        x = _pad_input(x, (0, 1))
    _check_span(op, (1, x.shape[2]), (1, weight.shape[2]), p1, (1, dil))
    b = _conv_bias(op, x, bias, weight.shape[0])
    _check_output(
        op, x.unsqueeze_dim(2), weight.shape[0], (1, weight.shape[2]), (1, st), p1, (1, dil)
    )
    attrs = {"stride": (1, st), "padding": p1, "dilation": (1, dil), "groups": groups}
    # (N, C, L) -> (N, C, 1, L)
    out = apply(OPS["conv2d"], (x.unsqueeze_dim(2), weight.unsqueeze_dim(2), b), attrs)
    out = out.squeeze_dim(2)
    return out.squeeze_dim(0) if unbatched else out


def conv_transpose2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    output_padding: IntOrPair = 0,
    groups: int = 1,
    dilation: IntOrPair = 1,
) -> Tensor:
    """Transposed 2-D convolution (the adjoint of ``conv2d``), as in PyTorch.

    Args:
        x: Input (N, C_in, H, W), or (C_in, H, W) unbatched.
        weight: (C_in, C_out / groups, kh, kw).
        bias: (C_out,), or None.
        output_padding: Extra size added to one side of the output; smaller than stride or
            dilation.

    Returns:
        (N, C_out, Ho, Wo) with
        Ho = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1.
    """
    op = "conv_transpose2d"
    x, weight, unbatched = _conv_operands(
        op, x, weight, 2, "(N, C, H, W)", "(in_channels, out_channels / groups, kh, kw)"
    )
    st = _pair(op, "stride", stride, 1)
    pad = _pair(op, "padding", padding, 0)
    opad = _pair(op, "output_padding", output_padding, 0)
    dil = _pair(op, "dilation", dilation, 1)
    groups = checks.int_arg(op, "groups", groups, lo=1)
    if weight.shape[0] % groups:
        raise ShapeError(
            f"{op}: expected groups >= 1 dividing the weight's {weight.shape[0]} input channels, "
            f"got {groups!r}."
        )
    if x.shape[1] != weight.shape[0]:
        raise ShapeError(
            f"{op}: input has {x.shape[1]} channels but the weight expects {weight.shape[0]} "
            "(its first dim is in_channels)."
        )
    for i in range(2):
        if opad[i] >= max(st[i], dil[i]):
            raise ShapeError(
                f"{op}: output_padding {opad} must be smaller than stride {st} or dilation {dil}."
            )
        size = (x.shape[2 + i] - 1) * st[i] - 2 * pad[i] + dil[i] * (weight.shape[2 + i] - 1)
        if size + opad[i] + 1 < 1:
            raise ShapeError(
                f"{op}: the output would be empty along spatial dim {i} (padding {pad} is too "
                f"large for input {x.shape} and kernel {weight.shape[2:]})."
            )
    b = _conv_bias(op, x, bias, weight.shape[1] * groups)
    attrs = {
        "stride": st,
        "padding": pad,
        "output_padding": opad,
        "groups": groups,
        "dilation": dil,
    }
    out = apply(OPS["conv_transpose2d"], (x, weight, b), attrs)
    return out.squeeze_dim(0) if unbatched else out


# ---------------------------------------------------------------- normalisation
def _norm_shape(op: str, x: Tensor, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    shape = checks.sizes(op, normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k :]) != shape:
        raise ShapeError(
            f"{op}: expected the input's trailing dims to equal normalized_shape {shape}, got "
            f"input {x.shape}."
        )
    return shape


def _affine(
    op: str, x: Tensor, p: Tensor | None, shape: tuple[int, ...], what: str, fill: float
) -> Tensor:
    if p is None:
        return _const(x, shape, fill)
    p = _float(op, p, what)
    if p.shape != shape:
        raise ShapeError(f"{op}: expected {what} of shape {shape}, got {p.shape}.")
    _same_dtype(op, x, p, what)
    return p


def layer_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, then scale and shift.

    (x - mean) / sqrt(var + eps) * weight + bias with the biased variance; one fused row.

    Args:
        x: (*, *normalized_shape).
        weight, bias: Of shape ``normalized_shape``, or None (ones / zeros).
    """
    if type(x) is Tensor and type(weight) is Tensor and type(bias) is Tensor:
        # the common case (float operands of one dtype, the weight and bias of the normalised
        # shape), read off the raw arrays; anything else takes the checks below
        xd, wd = x._raw, weight._raw
        bd = bias._raw
        dt = xd.dtype
        ws = wd.shape
        k = len(ws)
        if (
            dt in _FLOAT_DTYPES
            and wd.dtype == dt
            and bd.dtype == dt
            and k
            and bd.shape == ws
            and xd.shape[-k:] == ws
            and (
                ws == normalized_shape
                if type(normalized_shape) is tuple
                else k == 1 and type(normalized_shape) is int and ws[0] == normalized_shape
            )
        ):
            attrs = {"normalized_ndim": k, "eps": checks.float_arg("layer_norm", "eps", eps)}
            return apply(_LAYER_NORM, (x, weight, bias), attrs)
    op = "layer_norm"
    x = _float(op, x)
    shape = _norm_shape(op, x, normalized_shape)
    w = _affine(op, x, weight, shape, "weight", 1.0)
    b = _affine(op, x, bias, shape, "bias", 0.0)
    attrs = {"normalized_ndim": len(shape), "eps": checks.float_arg(op, "eps", eps)}
    return apply(_LAYER_NORM, (x, w, b), attrs)


def rms_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing ``normalized_shape`` dims.

    ``eps`` defaults to the machine epsilon of x's dtype, as in PyTorch.
    """
    op = "rms_norm"
    x = _float(op, x)
    shape = _norm_shape(op, x, normalized_shape)
    w = _affine(op, x, weight, shape, "weight", 1.0)
    e = _EPS[x.dtype.name] if eps is None else checks.float_arg("rms_norm", "eps", eps)
    return apply(OPS["rms_norm"], (x, w), {"normalized_ndim": len(shape), "eps": e})


def batch_norm(
    x: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Batch normalisation over every dim but the channel dim 1, PyTorch's functional form.

    Tensors are immutable, so the running statistics are returned, not updated in place.

    Args:
        x: (N, C) or (N, C, *).
        running_mean, running_var: (C,) statistics, or None (then ``training`` must be True).
        training: Normalise with the batch's statistics (biased variance) and return the running
            statistics moved by ``momentum`` towards them (unbiased variance, as in PyTorch).
            When False, normalise with the running statistics and return them unchanged.

    Returns:
        (output of x's shape, new running_mean, new running_var); the statistics are ``None``
        when none were given, and never carry gradients.
    """
    op = "batch_norm"
    x = _float(op, x)
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input (N, C, *) of rank >= 2, got {x.shape}.")
    c = x.shape[1]
    stats = []
    for name, s in (("running_mean", running_mean), ("running_var", running_var)):
        if s is not None:
            s = _float(op, s, name)
            if s.shape != (c,):
                raise ShapeError(f"batch_norm: expected {name} of shape ({c},), got {s.shape}.")
        stats.append(s)
    rm, rv = stats
    w = _affine(op, x, weight, (c,), "weight", 1.0)
    b = _affine(op, x, bias, (c,), "bias", 0.0)
    if not training:
        if rm is None or rv is None:
            raise ShapeError(
                "batch_norm: expected running_mean and running_var when training=False, got "
                "None. Pass training=True to normalise with the batch's statistics."
            )
        bshape = (1, c) + (1,) * (x.ndim - 2)
        rm_c, rv_c = rm.without_autodiff().detach(), rv.without_autodiff().detach()
        scale = w * (rv_c + eps).sqrt().recip()
        shift = b - rm_c * scale
        return x * scale.reshape(bshape) + shift.reshape(bshape), rm, rv
    n = x.numel() // max(c, 1)
    if n <= 1:
        raise ShapeError(
            f"batch_norm: expected more than 1 value per channel when training, got input "
            f"{x.shape}. Use a larger batch or training=False."
        )
    out = apply(OPS["batch_norm"], (x, w, b), {"eps": checks.float_arg("batch_norm", "eps", eps)})
    if rm is None and rv is None:
        return out, None, None
    # batch statistics as plain constants (one backend kernel): the running averages carry no
    # gradient; the variance is unbiased, as in PyTorch
    hw = x._hardware
    mean_r, var_r = hw.b.batch_stats(x._raw, 1)
    mean, var = from_raw(mean_r, hw), from_raw(var_r, hw)
    new_rm = None if rm is None else rm * (1 - momentum) + mean * momentum
    new_rv = None if rv is None else rv * (1 - momentum) + var * momentum
    return out, new_rm, new_rv


# ---------------------------------------------------------------- attention
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """softmax(q k^T * scale + mask) v, one fused row (PyTorch's argument conventions).

    Args:
        q: (*, L, E) queries; k: (*, S, E) keys; v: (*, S, Ev) values. Batch dims broadcast.
        attn_mask: Broadcastable to (*, L, S): a bool mask (True = may attend) or an additive
            float mask.
        dropout_p: Drop attention weights with this probability; the mask is a kept random
            tensor drawn before the row runs (pass 0 when evaluating).
        is_causal: Query i attends to keys j <= i (top-left aligned); excludes ``attn_mask``.
        scale: Defaults to 1 / sqrt(E).

    Returns:
        (*, L, Ev). A query row whose keys are all masked out (every score -inf) gives 0 and passes
        no gradient, as PyTorch's attention does; batch dims of q, k, v broadcast (k, v may be
        rank 2).
    """
    if type(q) is Tensor and type(k) is Tensor and type(v) is Tensor:
        # the common case (no mask or dropout; float q, k, v of one dtype, device and strategy,
        # with the same batch dims), read off the raw arrays; anything else takes the checks
        qd, kd, vd = q._raw, k._raw, v._raw
        qs, ks, vs = qd.shape, kd.shape, vd.shape
        dt = qd.dtype
        if (
            attn_mask is None
            and dropout_p == 0.0
            and dt in _FLOAT_DTYPES
            and kd.dtype == dt
            and vd.dtype == dt
            and k._hardware is q._hardware
            and v._hardware is q._hardware
            and k._ckpt_strategy is q._ckpt_strategy
            and v._ckpt_strategy is q._ckpt_strategy
            and len(qs) == len(ks) == len(vs) >= 2
            and qs[:-2] == ks[:-2] == vs[:-2]
            and qs[-1] == ks[-1]
            and ks[-2] == vs[-2]
        ):
            none = _none_operand(q)
            s = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
            attrs = {"scale": s, "is_causal": bool(is_causal)}
            return apply(_ATTENTION, (q, k, v, none, none), attrs)
    op = "scaled_dot_product_attention"
    q = _float(op, q, "q")
    k = _float(op, k, "k")
    v = _float(op, v, "v")
    for name, t in (("k", k), ("v", v)):
        _same_dtype(op, q, t, name)
        _operands(op, q, t)
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ShapeError(
            f"{op}: expected q, k, v of rank >= 2 (*, L, E), got {q.shape}, {k.shape}, {v.shape}."
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"{op}: expected q (*, L, E), k (*, S, E), v (*, S, Ev), got {q.shape}, {k.shape}, "
            f"{v.shape}: the embedding sizes of q and k and the lengths of k and v must match."
        )
    batch = checks.broadcast_shapes(op, q.shape[:-2], k.shape[:-2])
    batch = checks.broadcast_shapes(op, batch, v.shape[:-2])
    score_shape = (*batch, q.shape[-2], k.shape[-2])
    if is_causal and attn_mask is not None:
        raise ShapeError(f"{op}: pass either attn_mask or is_causal=True, not both.")
    if not 0.0 <= dropout_p < 1.0:
        raise ShapeError(f"{op}: expected 0 <= dropout_p < 1, got {dropout_p}.")
    none = _none_operand(q)
    bias = none
    if attn_mask is not None:
        attn_mask = _tensor(op, attn_mask, "attn_mask")
        _operands(op, q, attn_mask)
        checks.broadcast_shapes(op, score_shape, attn_mask.shape)
        if attn_mask.dtype.is_bool:
            bias = _const(q, attn_mask.shape, 0.0).mask_fill(~attn_mask, float("-inf"))
        elif attn_mask.dtype.is_float:
            bias = attn_mask if attn_mask.dtype is q.dtype else attn_mask.cast(q.dtype)
        else:
            raise DTypeError(
                f"{op}: expected a bool or float attn_mask, got {attn_mask.dtype.name}."
            )
        if bias.ndim == 0:  # a 0-d mask means "none" to the row: give it a (1, 1) shape
            bias = bias.reshape((1, 1))
    keep = none
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if dropout_p > 0.0 and bias is none:
        if q._hardware.b.attention_draws_dropout(q._raw, k._raw, v._raw, bool(is_causal)):
            # one fused kernel draws the mask from the device's generator and its backward
            # draws it again: no (*, L, S) mask tensor (the row is never recomputed)
            attrs = {"scale": s, "is_causal": bool(is_causal), "dropout_p": float(dropout_p)}
            return apply(_ATTENTION_DROPOUT, (q, k, v), attrs)
    if dropout_p > 0.0:
        keep = Tensor.random(
            score_shape, Distribution.bernoulli(1.0 - dropout_p), device=q.device, dtype=q.dtype
        ) * (1.0 / (1.0 - dropout_p))
    return apply(_ATTENTION, (q, k, v, bias, keep), {"scale": s, "is_causal": bool(is_causal)})
