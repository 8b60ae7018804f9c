"""A backend whose arrays are tensors: backward rules run on it are recorded as graph ops.

``backward(create_graph=True)`` (``ember.autodiff.higher``) runs each row's own rule ``rule(ctx,
grad)`` with ``ctx.b`` an instance of ``RuleBackend`` and ``ctx.inputs`` / ``ctx.output`` /
``grad`` tensors. Every backend method a rule calls is answered here by dispatching a registry
row (or a composition of rows), so the gradient a rule returns is a tracked tensor of a new graph
and is differentiable in turn: one mechanism, no second rules. Methods that compute masks or
indices (comparisons, ``argmax``, ``argsort``) return untracked constants, as their rows have no
gradient. A fused backend kernel without a differentiable form raises ``NotRecordable``, which
the pass turns into an ``AutodiffError`` naming the row.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

from .._core.dispatch import apply, wrap
from .._core.tensor import Tensor
from ..dtype import bool_, float32
from ..ops.registry import OPS

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


class NotRecordable(Exception):
    """A rule called a backend kernel that has no differentiable form (``kernel`` names it)."""

    def __init__(self, kernel: str) -> None:
        super().__init__(kernel)
        self.kernel = kernel


class RuleTensor(Tensor):
    """The tensors rules see under ``create_graph``: a ``Tensor`` with the array spelling
    ``.mT`` that rules use on raw arrays (the last two dims swapped: the ``matrix_transpose``
    row)."""

    __slots__ = ()

    @property
    def mT(self) -> Tensor:
        return _mT(self)


def _mT(x: Tensor) -> Tensor:
    return apply(OPS["matrix_transpose"], (x,), {})


def _u(x: Any) -> Any:
    """The raw array of a tensor (other values unchanged)."""
    return x._data if isinstance(x, Tensor) else x


class RuleBackend:
    """Backend methods over tensors of one device, each a registry row or a composition of rows.

    Attributes:
        raw: The real backend (what constants and masks are computed with).
        dev: The plain device the tensors live on.
        strategy: The autodiff context given to constants (``None``: plain tensors, nothing
            recorded; used when no graph is wanted).
    """

    __slots__ = ("dev", "raw", "strategy")

    def __init__(self, dev: Any, strategy: Any) -> None:
        self.dev = dev
        self.raw = dev.b
        self.strategy = strategy

    # ------------------------------------------------------------------ helpers
    def const(self, data: Any) -> RuleTensor:
        """An untracked tensor around the raw array ``data``."""
        return wrap(RuleTensor, data, self.dev, self.strategy)  # type: ignore[return-value]

    def row(self, name: str, xs: Sequence[Tensor], **attrs: Any) -> Tensor:
        spec = OPS[name]
        return apply(spec, list(xs) if spec.arity == -1 else tuple(xs), attrs)

    def __getattr__(self, name: str) -> Any:
        """Any other backend method that is a row's forward (the registry's convention: a row
        named like the backend method, no ``forward=`` of its own) dispatches that row; rows
        without a gradient (comparisons, ``floor_divide``) give constants. Anything else is an
        ``AttributeError``, which the recorded pass reports naming the row whose rule asked."""
        spec = OPS.get(name)
        method = getattr(self.raw, name, None) if spec is not None else None
        if spec is None or spec.forward is not None or method is None or spec.arity < 1:
            raise AttributeError(name, name=name, obj=self)
        try:
            attr_names = list(inspect.signature(method).parameters)[spec.arity :]
        except (TypeError, ValueError):  # a builtin kernel (torch.neg): inputs only
            attr_names = []

        def call(*args: Any, **kwargs: Any) -> Tensor:
            xs = args[: spec.arity]
            attrs = dict(zip(attr_names, args[spec.arity :]))
            attrs.update(kwargs)
            like = next((x for x in xs if isinstance(x, Tensor)), None)
            ts = [self._operand(name, x, like) for x in xs]
            return self.row(name, ts, **attrs)  # untracked operands record nothing

        return call

    def _operand(self, op: str, x: Any, like: Tensor | None) -> Tensor:
        """``x`` as a tensor operand: tensors as they are, raw arrays and numbers as constants
        (a number takes the dtype of the call's first tensor, as a 0-d array)."""
        if isinstance(x, Tensor):
            return x
        raw = self.raw
        if type(x) is raw.array_type:
            return self.const(x)
        if isinstance(x, (bool, int, float)) and like is not None:
            return self.const(raw.full((), x, like.dtype))
        raise NotRecordable(f"{op} (called with a {type(x).__name__} operand)")

    # ------------------------------------------------------------------ dtypes and constants
    def dtype_of(self, x: Tensor) -> Any:
        return x.dtype

    def is_float(self, x: Tensor) -> bool:
        return x.dtype.is_float

    def zeros_like(self, x: Tensor) -> Tensor:
        return self.const(self.raw.zeros_like(x._data))

    def ones_like(self, x: Tensor) -> Tensor:
        return self.const(self.raw.ones_like(x._data))

    def full(self, shape: Sequence[int], value: float, dtype: Any) -> Tensor:
        return self.const(self.raw.full(tuple(shape), value, dtype))

    def copy(self, x: Tensor) -> Tensor:
        return x  # values, not layouts, matter to a recorded rule

    def to_numpy_view(self, x: Tensor) -> Any:
        return self.raw.to_numpy_view(x._data)

    def cast(self, x: Tensor, dtype: Any) -> Tensor:
        src = x.dtype
        if src is dtype:
            return x
        return self.row("cast", (x,), dtype=dtype, src=src)

    # ------------------------------------------------------------------ masks and indices
    def greater(self, x: Any, y: Any) -> Tensor:
        return self.const(self.raw.greater(_u(x), _u(y)))

    def greater_equal(self, x: Any, y: Any) -> Tensor:
        return self.const(self.raw.greater_equal(_u(x), _u(y)))

    def lower(self, x: Any, y: Any) -> Tensor:
        return self.const(self.raw.lower(_u(x), _u(y)))

    def lower_equal(self, x: Any, y: Any) -> Tensor:
        return self.const(self.raw.lower_equal(_u(x), _u(y)))

    def equal(self, x: Any, y: Any) -> Tensor:
        return self.const(self.raw.equal(_u(x), _u(y)))

    def not_equal(self, x: Any, y: Any) -> Tensor:
        return self.const(self.raw.not_equal(_u(x), _u(y)))

    def arange(self, start: int, end: int, step: int, dtype: Any) -> Tensor:
        return self.const(self.raw.arange(start, end, step, dtype))

    def logical_and(self, x: Tensor, y: Tensor) -> Tensor:
        return self.const(self.raw.logical_and(_u(x), _u(y)))

    def argmax(self, x: Tensor, dim: int) -> Tensor:
        return self.const(self.raw.argmax(x._data, dim))

    def argmin(self, x: Tensor, dim: int) -> Tensor:
        return self.const(self.raw.argmin(x._data, dim))

    def argsort(self, x: Tensor, dim: int, descending: bool) -> Tensor:
        return self.const(self.raw.argsort(x._data, dim, descending))

    def where(self, mask: Tensor, x: Tensor, y: Tensor) -> Tensor:
        # mask_where(y, mask, x) takes x where mask, else y
        return self.row("mask_where", (y, mask, x))

    # ------------------------------------------------------------------ elementwise rows
    def matmul(self, x: Tensor, y: Tensor) -> Tensor:
        # the Tensor product: 1-D operands as NumPy's matmul takes them (the row wants >= 2-D)
        return x @ y

    def log(self, x: Tensor) -> Tensor:
        return self.row("log", (x,))

    def exp(self, x: Tensor) -> Tensor:
        return self.row("exp", (x,))

    def sqrt(self, x: Tensor) -> Tensor:
        return self.row("sqrt", (x,))

    def sin(self, x: Tensor) -> Tensor:
        return self.row("sin", (x,))

    def cos(self, x: Tensor) -> Tensor:
        return self.row("cos", (x,))

    def tanh(self, x: Tensor) -> Tensor:
        return self.row("tanh", (x,))

    def erf(self, x: Tensor) -> Tensor:
        return self.row("erf", (x,))

    def sign(self, x: Tensor) -> Tensor:
        return self.row("sign", (x,))

    def sigmoid(self, x: Tensor) -> Tensor:
        return self.row("sigmoid", (x,))

    def softplus(self, x: Tensor) -> Tensor:
        return self.row("softplus", (x,))

    def powf_scalar(self, x: Tensor, value: float) -> Tensor:
        return self.row("powf_scalar", (x,), value=value)

    def powi_scalar(self, x: Tensor, value: int) -> Tensor:
        return self.row("powi_scalar", (x,), value=value)

    def clamp(self, x: Tensor, min: float | None, max: float | None) -> Tensor:
        return self.row("clamp", (x,), min=min, max=max)

    # ------------------------------------------------------------------ activation backwards
    def ce_chunk_grad(
        self, z: Tensor, lse: Tensor, t: Tensor, g: Tensor, lo: int, keep: float, smooth: float,
        dtype: Any,
    ) -> Tensor:  # fmt: skip
        """linear_cross_entropy's chunk logit gradient as rows (the default kernel's formula)."""
        zw = z if z.dtype.itemsize >= 4 else self.cast(z, float32)
        hit = self.cast(self.equal(t, self.arange(lo, lo + z.shape[1], 1, t.dtype)), zw.dtype)
        d = self.exp(zw - lse) - hit * keep
        if smooth:
            d = d - smooth
        d = d * g
        return d if d.dtype is dtype else self.cast(d, dtype)

    def relu_backward(self, grad: Tensor, out: Tensor) -> Tensor:
        # the gradient passes where the output is positive
        return self.where(self.greater(out, 0.0), grad, self.zeros_like(grad))

    def gelu_backward(self, grad: Tensor, x: Tensor, approximate: str) -> Tensor:
        if approximate == "tanh":
            x2 = x * x
            t = self.tanh((x + x2 * x * _GELU_C) * _SQRT_2_OVER_PI)
            # d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3c x^2)
            d = (t + 1) * 0.5 + x * (1 - t * t) * (x2 * (3 * _GELU_C) + 1) * (0.5 * _SQRT_2_OVER_PI)
            return grad * d
        # d/dx x Phi(x) = Phi(x) + x phi(x)
        cdf = (self.erf(x * _SQRT_HALF) + 1) * 0.5
        pdf = self.exp(x * x * -0.5) * _INV_SQRT_2PI
        return grad * (cdf + x * pdf)

    def silu_backward(self, grad: Tensor, x: Tensor) -> Tensor:
        s = self.sigmoid(x)
        # d/dx x s(x) = s (1 + x (1 - s))
        return grad * (s * (x * (1 - s) + 1))

    # ------------------------------------------------------------------ layout rows
    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        return self.row("reshape", (x,), shape=_resolve(tuple(shape), x.numel()))

    def permute(self, x: Tensor, dims: Sequence[int]) -> Tensor:
        return self.row("permute", (x,), dims=tuple(dims))

    def expand(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        if tuple(x.shape) == tuple(shape):
            return x
        return self.row("expand", (x,), shape=tuple(shape))

    def flip(self, x: Tensor, dims: Sequence[int]) -> Tensor:
        return self.row("flip", (x,), dims=tuple(dims))

    def tril(self, x: Tensor, diagonal: int) -> Tensor:
        return self.row("tril", (x,), diagonal=diagonal)

    def triu(self, x: Tensor, diagonal: int) -> Tensor:
        return self.row("triu", (x,), diagonal=diagonal)

    def index(self, x: Tensor, key: Any) -> Tensor:
        return self.row("index", (x,), key=key)

    def cat(self, xs: Sequence[Tensor], dim: int) -> Tensor:
        return self.row("cat", xs, dim=dim)

    def split_sizes(self, x: Tensor, sizes: Sequence[int], dim: int) -> list[Tensor]:
        d = dim % x.ndim
        lead = (slice(None),) * d
        out = []
        start = 0
        for s in sizes:
            out.append(self.index(x, (*lead, slice(start, start + s))))
            start += s
        return out

    def slice_assign(self, x: Tensor, values: Tensor, key: Any) -> Tensor:
        return self.row("slice_assign", (x, values), key=key)

    def index_put_zeros(self, shape: Sequence[int], key: Any, values: Tensor) -> Tensor:
        zeros = self.full(shape, 0, values.dtype)
        return self.slice_assign(zeros, values, key)

    # ------------------------------------------------------------------ reductions
    def sum(self, x: Tensor) -> Tensor:
        return self.row("sum", (x,))

    def sum_dim(self, x: Tensor, dim: int) -> Tensor:
        return self.row("sum_dim", (x,), dim=dim)

    def mean_dim(self, x: Tensor, dim: int) -> Tensor:
        return self.row("mean_dim", (x,), dim=dim)

    def cumsum(self, x: Tensor, dim: int) -> Tensor:
        return self.row("cumsum", (x,), dim=dim)

    def cumprod(self, x: Tensor, dim: int) -> Tensor:
        # running products, one multiply per position: exact with zeros, differentiable
        d = dim % x.ndim
        lead = (slice(None),) * d
        acc = self.index(x, (*lead, slice(0, 1)))
        parts = [acc]
        for i in range(1, x.shape[d]):
            acc = acc * self.index(x, (*lead, slice(i, i + 1)))
            parts.append(acc)
        return parts[0] if len(parts) == 1 else self.cat(parts, d)

    def sum_to_shape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        shape = tuple(shape)
        if tuple(x.shape) == shape:
            return x
        lead = x.ndim - len(shape)
        for d in range(x.ndim):
            if d < lead or (shape[d - lead] == 1 and x.shape[d] != 1):
                x = self.sum_dim(x, d)
        return self.reshape(x, shape)

    # ------------------------------------------------------------------ gather / scatter
    def gather(self, x: Tensor, indices: Tensor, dim: int) -> Tensor:
        return self.row("gather", (x, indices), dim=dim)

    def scatter_add(self, x: Tensor, indices: Tensor, values: Tensor, dim: int) -> Tensor:
        return self.row("scatter", (x, indices, values), dim=dim)

    def select(self, x: Tensor, indices: Tensor, dim: int) -> Tensor:
        return self.row("select", (x, indices), dim=dim)

    def put_along_dim_zeros(
        self, shape: Sequence[int], idx: Tensor, values: Tensor, dim: int
    ) -> Tensor:
        # every position of ``idx`` names a distinct slot: adding into zeros puts the values
        return self.scatter_add(self.full(shape, 0, values.dtype), idx, values, dim)

    def select_add(self, x: Tensor, indices: Tensor, values: Tensor, dim: int) -> Tensor:
        # index_add along dim = scatter-add with the indices broadcast over the other dims
        raw = self.raw
        d = dim % values.ndim
        view = [1] * values.ndim
        view[d] = values.shape[d]
        idx = raw.expand(raw.reshape(_u(indices), tuple(view)), tuple(values.shape))
        return self.scatter_add(x, self.const(raw.add_scalar(idx, 0)), values, d)

    # ------------------------------------------------------------------ fused nn kernels
    def attention_weights(
        self, q: Tensor, k: Tensor, bias: Tensor, scale: float, is_causal: bool
    ) -> Tensor:
        """softmax(q k^T scale + bias [+ causal mask]); a fully masked row gives 0."""
        raw = self.raw
        s = self.row("matmul", (q, _mT(k))) * scale
        if bias.ndim:
            s = s + bias
        if is_causal:
            L, S = s.shape[-2:]
            allowed = raw.tril(raw.full((L, S), True, bool_), 0)
            s = self.row("mask_fill", (s, self.const(raw.logical_not(allowed))), value=-math.inf)
        dead = raw.equal(raw.max_dim(s._data, s.ndim - 1), -math.inf)
        # zero a dead row's scores first so its softmax (then replaced by 0) carries no NaN
        s = self.row("mask_fill", (s, self.const(dead)), value=0.0)
        p = self.row("softmax", (s,), dim=s.ndim - 1)
        return self.row("mask_fill", (p, self.const(dead)), value=0.0)

    def _one_hot(self, target: Tensor, valid: Any, num_classes: int, like: Tensor) -> Tensor:
        raw = self.raw
        t = target._data
        safe = raw.where(valid, t, raw.zeros_like(t))
        r = t.shape[0]
        dt = raw.dtype_of(like._data)
        ones = raw.full((r, 1), 1, dt)
        zeros = raw.full((r, num_classes), 0, dt)
        return self.const(raw.scatter_add(zeros, raw.reshape(safe, (r, 1)), ones, 1))

    def cross_entropy_backward(
        self,
        grad: Tensor,
        logits: Tensor,
        target: Tensor,
        lse: Any,
        ignore_index: int,
        label_smoothing: float,
    ) -> Tensor:
        # softmax - smoothed one-hot, times the row's gradient (0 on ignored rows); the
        # residual logsumexp is a function of the logits, so the softmax is recomputed from them
        raw = self.raw
        r, c = logits.shape
        valid = raw.not_equal(target._data, ignore_index)
        g = self.where(self.const(valid), grad, self.zeros_like(grad))
        onehot = self._one_hot(target, valid, c, logits)
        t = onehot * (1 - label_smoothing) + label_smoothing / c
        p = self.row("softmax", (logits,), dim=1)
        return (p - t) * self.reshape(g, (r, 1))

    def cross_entropy_soft_backward(
        self, grad: Tensor, logits: Tensor, probs: Tensor, label_smoothing: float
    ) -> tuple[Tensor, Tensor]:
        eps = label_smoothing
        t = probs * (1 - eps) + eps / probs.shape[1] if eps else probs
        g = self.reshape(grad, (grad.shape[0], 1))
        p = self.row("softmax", (logits,), dim=1)
        logp = self.row("log_softmax", (logits,), dim=1)
        # d/dx_j = sum(t) softmax_j - t_j;  d/dt_j = -(1 - eps) log_softmax_j
        gx = (p * self.sum_dim(t, 1) - t) * g
        gt = logp * (g * -(1 - eps))
        return gx, gt

    def nll_loss_backward(
        self, grad: Tensor, target: Tensor, num_classes: int, ignore_index: int
    ) -> Tensor:
        valid = self.raw.not_equal(target._data, ignore_index)
        g = self.where(self.const(valid), -grad, self.zeros_like(grad))
        onehot = self._one_hot(target, valid, num_classes, grad)
        return onehot * self.reshape(g, (grad.shape[0], 1))

    def binary_cross_entropy_backward(
        self, grad: Tensor, p: Tensor, t: Tensor
    ) -> tuple[Tensor, Tensor]:
        # d/dp = (p - t) / (p (1 - p)), the denominator kept >= 1e-12;  d/dt = log(1 - p) - log(p)
        gp = grad * (p - t) / self.clamp(p * (1 - p), 1e-12, None)
        log1m = self.clamp(self.row("log1p", (-p,)), -100.0, None)
        gt = grad * (log1m - self.clamp(self.log(p), -100.0, None))
        return gp, gt

    def embedding_backward(self, grad: Tensor, indices: Tensor, num_embeddings: int) -> Tensor:
        # grad's rows summed into a (num_embeddings, D) table
        d = grad.shape[-1]
        flat = self.const(self.raw.reshape(indices._data, (-1,)))
        zeros = self.full((num_embeddings, d), 0, grad.dtype)
        return self.select_add(zeros, flat, self.reshape(grad, (-1, d)), 0)

    def _bias_grad(self, grad: Tensor) -> Tensor:
        """The bias gradient of a convolution: ``grad`` summed over batch and space."""
        g = self.sum_dim(self.sum_dim(self.sum_dim(grad, 0), 2), 3)
        return self.reshape(g, (grad.shape[1],))

    def conv2d_backward(
        self,
        grad: Tensor,
        x: Tensor,
        weight: Tensor,
        stride: Any,
        padding: Any,
        dilation: Any,
        groups: int,
        need_input: bool,
        need_weight: bool,
        need_bias: bool = True,
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        # the kernel's two halves are rows of their own (ember/ops/backward_rows.py)
        geo = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        gx = gw = None
        if need_input:
            gx = self.row("conv2d_input_grad", (grad, weight), input_shape=tuple(x.shape), **geo)
        if need_weight:
            w_shape = tuple(weight.shape)
            gw = self.row("conv2d_weight_grad", (grad, x), weight_shape=w_shape, **geo)
        return gx, gw, (self._bias_grad(grad) if need_bias else None)

    def conv_transpose2d_backward(
        self,
        grad: Tensor,
        x: Tensor,
        weight: Tensor,
        stride: Any,
        padding: Any,
        groups: int,
        dilation: Any,
        need_input: bool,
        need_weight: bool,
        need_bias: bool = True,
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        # conv_transpose2d by w is the adjoint of conv2d by w (C_w^T): its input gradient is
        # C_w grad, its weight gradient that of <x, C_W grad>, conv2d's weight half
        geo = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        gx = gw = None
        if need_input:
            zero = self.full((weight.shape[0],), 0, weight.dtype)
            gx = self.row("conv2d", (grad, weight, zero), **geo)
        if need_weight:
            w_shape = tuple(weight.shape)
            gw = self.row("conv2d_weight_grad", (x, grad), weight_shape=w_shape, **geo)
        return gx, gw, (self._bias_grad(grad) if need_bias else None)

    def max_pool2d_backward(
        self,
        grad: Tensor,
        x: Tensor,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: bool = False,
    ) -> Tensor:
        """Each window's gradient placed at its first maximum (row-major tap order), as rows:
        one masked slice assignment per tap. The positions are constants (the derivative by
        ``x`` is 0 almost everywhere); the result is linear in ``grad``. ``grad``'s shape fixes
        the windows (in ceil mode the last may run past the padding: more -inf after)."""
        raw = self.raw
        n, c, h, w = x.shape
        oh, ow = grad.shape[2], grad.shape[3]
        (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
        (kh, kw) = kernel_size
        padded = (
            n,
            c,
            max(h + 2 * ph, (oh - 1) * sh + dh * (kh - 1) + 1),
            max(w + 2 * pw, (ow - 1) * sw + dw * (kw - 1) + 1),
        )
        inner = (slice(None), slice(None), slice(ph, ph + h), slice(pw, pw + w))
        xp = raw.slice_assign(raw.full(padded, -math.inf, raw.dtype_of(x._data)), x._data, inner)
        taps = [
            (
                slice(None),
                slice(None),
                slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                slice(j * dw, j * dw + sw * (ow - 1) + 1, sw),
            )
            for i in range(kernel_size[0])
            for j in range(kernel_size[1])
        ]
        vals = [raw.index(xp, key) for key in taps]
        best = vals[0]
        for v in vals[1:]:
            best = raw.where(raw.greater(v, best), v, best)
        taken = None
        zeros = self.zeros_like(grad)
        out = None
        for key, v in zip(taps, vals):
            hit = raw.equal(v, best)
            if taken is not None:
                hit = raw.logical_and(hit, raw.logical_not(taken))
            taken = hit if taken is None else raw.logical_or(taken, hit)
            part = self.index_put_zeros(padded, key, self.where(self.const(hit), grad, zeros))
            out = part if out is None else out + part
        assert out is not None
        return self.index(out, inner)


def _resolve(shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """``shape`` with a -1 entry replaced by the size it stands for."""
    if -1 not in shape:
        return shape
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    return tuple(numel // max(known, 1) if s == -1 else s for s in shape)
