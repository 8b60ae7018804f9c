"""The NumPy backend: ember's embedded default. Arrays are ``np.ndarray``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ... import dtype as dt
from ...dtype import DType
from ..base import Backend, RngState
from ..registry import register_backend
from .kernels import activations as _act
from .kernels import adam as _adam
from .kernels import attention as _attn
from .kernels import bce as _bce
from .kernels import conv as _conv
from .kernels import embedding as _emb
from .kernels import malloc as _malloc
from .kernels import matmul as _matmul
from .kernels import norm as _norm
from .kernels import pooling as _pooling
from .kernels import softmax as _softmax
from .special import erf as _erf

Shape = tuple[int, ...]

_TO_NP: dict[DType, np.dtype] = {
    dt.float16: np.dtype(np.float16),
    dt.bfloat16: np.dtype(ml_dtypes.bfloat16),
    dt.float32: np.dtype(np.float32),
    dt.float64: np.dtype(np.float64),
    dt.int8: np.dtype(np.int8),
    dt.int32: np.dtype(np.int32),
    dt.int64: np.dtype(np.int64),
    dt.bool_: np.dtype(np.bool_),
}
_FROM_NP: dict[np.dtype, DType] = {v: k for k, v in _TO_NP.items()}
_NP_FLOATS = frozenset(v for k, v in _TO_NP.items() if k.is_float)
_SCALAR_OK = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def ember_dtype(d: np.dtype) -> DType | None:
    """The ember dtype of a NumPy dtype, or None when ember has no such dtype."""
    return _FROM_NP.get(d)


_malloc.tune()  # reuse freed activation-sized blocks (kernels/malloc.py)


@register_backend("numpy")
class NumpyBackend(Backend):
    """Primitives on ``np.ndarray``. Inputs were validated by ``ember._core.checks``."""

    name = "numpy"
    array_type = np.ndarray

    def __init__(self, where: str = "cpu") -> None:
        super().__init__(where)
        self.rng = np.random.default_rng()

    # ---------------------------------------------------------------- storage
    def from_numpy(self, a: np.ndarray, dtype: DType | None = None) -> np.ndarray:
        if dtype is None:
            return np.array(a, copy=True)
        return np.array(a, dtype=_TO_NP[dtype], copy=True)

    def to_numpy(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, copy=True)

    def dtype_of(self, x: np.ndarray) -> DType:
        return _FROM_NP[x.dtype]

    def is_float(self, x: np.ndarray) -> bool:
        return x.dtype in _NP_FLOATS

    def scalar_ok(self, x: np.ndarray) -> bool:
        """A float array whose kernels keep its dtype for a Python scalar operand (NEP 50);
        NumPy promotes bfloat16 (an ml_dtypes type) with a Python float to float32."""
        return x.dtype in _SCALAR_OK

    def asarray(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def cast(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        to = _TO_NP[dtype]
        if to.itemsize < x.dtype.itemsize and to.kind in "fV" and x.dtype.kind in "fV":
            # a narrowing float cast: values beyond the range give +-inf, as in PyTorch, silently
            with np.errstate(over="ignore"):
                return x.astype(to)
        return x.astype(to)

    def full(self, shape: Shape, value: float | int | bool, dtype: DType) -> np.ndarray:
        return np.full(shape, value, dtype=_TO_NP[dtype])

    def empty(self, shape: Shape, dtype: DType) -> np.ndarray:
        return np.empty(shape, dtype=_TO_NP[dtype])

    def arange(self, start: int, end: int, step: int, dtype: DType) -> np.ndarray:
        return np.arange(start, end, step, dtype=_TO_NP[dtype])

    def copy(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def seed(self, n: int) -> None:
        self.rng = np.random.default_rng(n)

    def uniform(self, shape: Shape, lo: float, hi: float, dtype: DType) -> np.ndarray:
        return self.rng.uniform(lo, hi, size=shape).astype(_TO_NP[dtype], copy=False)

    def normal(self, shape: Shape, mean: float, std: float, dtype: DType) -> np.ndarray:
        return self.rng.normal(mean, std, size=shape).astype(_TO_NP[dtype], copy=False)

    def bernoulli(self, shape: Shape, p: float, dtype: DType) -> np.ndarray:
        return (self.rng.random(size=shape) < p).astype(_TO_NP[dtype], copy=False)

    def rng_state(self) -> RngState:
        return {"numpy": self.rng.bit_generator.state}

    def set_rng_state(self, state: RngState) -> None:
        self.rng.bit_generator.state = state["numpy"]

    # ---------------------------------------------------------------- engine helpers
    def sum_to_shape(self, x: np.ndarray, shape: Shape) -> np.ndarray:
        """Sum a broadcast gradient back to ``shape``."""
        if x.shape == shape:
            return x
        lead = x.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, n in enumerate(shape) if n == 1 and x.shape[i + lead] != 1
        )
        out = x.sum(axis=axes, keepdims=True) if axes else x
        if lead:
            out = out.reshape(shape)
        return np.asarray(out)

    def zeros_like(self, x: np.ndarray) -> np.ndarray:
        return np.zeros_like(x)

    def ones_like(self, x: np.ndarray) -> np.ndarray:
        return np.ones_like(x)

    def index_put_zeros(self, shape: Shape, key: Any, values: np.ndarray) -> np.ndarray:
        out = np.zeros(shape, dtype=values.dtype)
        out[key] = values
        return out

    # ---------------------------------------------------------------- elementwise
    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    div = staticmethod(np.divide)
    floor_divide = staticmethod(np.floor_divide)
    remainder = staticmethod(np.remainder)
    neg = staticmethod(np.negative)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    log1p = staticmethod(np.log1p)
    sqrt = staticmethod(np.sqrt)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    tanh = staticmethod(np.tanh)
    abs = staticmethod(np.abs)

    @staticmethod
    def sign(x: np.ndarray) -> np.ndarray:
        """-1, 0 or 1 by sign; NaN gives 0, as PyTorch's sign (NumPy's gives NaN)."""
        out = np.sign(x)
        nan = out != out
        if nan.any():
            out = np.where(nan, out.dtype.type(0), out)
        return out

    equal = staticmethod(np.equal)
    not_equal = staticmethod(np.not_equal)
    greater = staticmethod(np.greater)
    greater_equal = staticmethod(np.greater_equal)
    lower = staticmethod(np.less)
    lower_equal = staticmethod(np.less_equal)
    logical_not = staticmethod(np.logical_not)
    logical_and = staticmethod(np.logical_and)
    logical_or = staticmethod(np.logical_or)

    def erf(self, x: np.ndarray) -> np.ndarray:
        return _erf(x)

    def recip(self, x: np.ndarray) -> np.ndarray:
        return np.reciprocal(x)

    def powf(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.power(x, y)

    def powf_scalar(self, x: np.ndarray, value: float) -> np.ndarray:
        if value == 2:
            return np.square(x)
        if value == -0.5:  # PyTorch's rsqrt: NaN for -inf and -inf for -0.0, where pow gives 0, inf
            return np.reciprocal(np.sqrt(x))
        return np.power(x, x.dtype.type(value))

    def powi_scalar(self, x: np.ndarray, value: int) -> np.ndarray:
        if value == 2:
            return np.square(x)
        if value < 0 and x.dtype.kind in "iu":
            return np.power(x.astype(np.float32), value)
        return np.power(x, value)

    def clamp(self, x: np.ndarray, min: float | None, max: float | None) -> np.ndarray:
        out = np.clip(x, min, max)
        # ml_dtypes' bfloat16 with Python float bounds computes in float32: keep the input dtype
        dt = out.dtype
        return out if dt is x.dtype or dt == x.dtype else out.astype(x.dtype)

    def where(self, mask: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.where(mask, x, y)

    def scalar(self, value: float | int | bool, like: np.ndarray) -> Any:
        """``value`` as a scalar of ``like``'s dtype, so NumPy never upcasts the array."""
        return like.dtype.type(value)

    # ---------------------------------------------------------------- reductions
    def sum(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x.sum())

    def sum_dim(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.sum(axis=dim, keepdims=True)

    def mean(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x.mean(dtype=x.dtype))

    def mean_dim(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.mean(axis=dim, keepdims=True, dtype=x.dtype)

    def max_dim(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.max(axis=dim, keepdims=True)

    def min_dim(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.min(axis=dim, keepdims=True)

    def argmax(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.argmax(axis=dim, keepdims=True)

    def argmin(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.argmin(axis=dim, keepdims=True)

    def take_along_dim(self, x: np.ndarray, idx: np.ndarray, dim: int) -> np.ndarray:
        return np.take_along_axis(x, idx, axis=dim)

    def put_along_dim_zeros(
        self, shape: Shape, idx: np.ndarray, values: np.ndarray, dim: int
    ) -> np.ndarray:
        out = np.zeros(shape, dtype=values.dtype)
        np.put_along_axis(out, idx, values, axis=dim)
        return out

    # ---------------------------------------------------------------- linalg
    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = _matmul.matmul(x, y)  # large products split between the kernel pool's threads
        # ml_dtypes has no bfloat16 matmul loop (NumPy computes it in float32): keep bfloat16
        return out if out.dtype == x.dtype else out.astype(x.dtype)

    def int8_matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """int8 (M, K) @ (K, N) -> int32, exact. NumPy's integer matmul has no BLAS, so the
        sums run in BLAS float32 while they stay exact (|sum| <= K * 128 * 127 < 2**24),
        float64 beyond."""
        k = a.shape[-1]
        ft = np.float32 if k * 128 * 127 < 1 << 24 else np.float64
        return np.matmul(a.astype(ft), b.astype(ft)).astype(np.int32)

    def linear(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        """x (*, K) @ w (N, K)^T + b (N,), the bias added in place; a 0-d ``b`` means none."""
        out = self.matmul(x, w.T)
        if b.ndim:
            np.add(out, b, out=out)
        return out

    # ---------------------------------------------------------------- movement
    def reshape(self, x: np.ndarray, shape: Shape) -> np.ndarray:
        return x.reshape(shape)

    def permute(self, x: np.ndarray, dims: Sequence[int]) -> np.ndarray:
        return x.transpose(dims)

    def expand(self, x: np.ndarray, shape: Shape) -> np.ndarray:
        return np.broadcast_to(x, shape)

    def index(self, x: np.ndarray, key: Any) -> np.ndarray:
        return np.asarray(x[key])

    def cat(self, xs: Sequence[np.ndarray], dim: int) -> np.ndarray:
        return np.concatenate(xs, axis=dim)

    def stack(self, xs: Sequence[np.ndarray], dim: int) -> np.ndarray:
        return np.stack(xs, axis=dim)

    def split_sizes(self, x: np.ndarray, sizes: Sequence[int], dim: int) -> list[np.ndarray]:
        bounds = np.cumsum(sizes)[:-1]
        return list(np.split(x, bounds, axis=dim))

    # ---------------------------------------------------------------- with a Python scalar
    @staticmethod
    def add_scalar(x: np.ndarray, value: Any) -> np.ndarray:
        return np.add(x, value)

    @staticmethod
    def sub_scalar(x: np.ndarray, value: Any) -> np.ndarray:
        return np.subtract(x, value)

    @staticmethod
    def mul_scalar(x: np.ndarray, value: Any) -> np.ndarray:
        return np.multiply(x, value)

    @staticmethod
    def div_scalar(x: np.ndarray, value: Any) -> np.ndarray:
        return np.divide(x, value)

    def rsub_scalar(self, x: np.ndarray, value: float) -> np.ndarray:
        return np.subtract(value, x)

    def rdiv_scalar(self, x: np.ndarray, value: float) -> np.ndarray:
        return np.divide(value, x)

    # ---------------------------------------------------------------- transfers
    def receive(self, x: Any, source: Any) -> np.ndarray:
        """``x``, an array of backend ``source``, as a NumPy array (zero-copy where possible)."""
        if source is self:
            return x
        return source.to_numpy_view(x)

    def to_numpy_view(self, x: np.ndarray) -> np.ndarray:
        return x

    # ---------------------------------------------------------------- indexing, shape, sorting,
    # stats and rounding primitives. Dims are non-negative ints; index arrays are int
    # arrays already checked to lie in range by ``ember._core`` before the call.
    def select(self, x: np.ndarray, indices: np.ndarray, dim: int) -> np.ndarray:
        return np.take(x, indices, axis=dim)

    def select_add(
        self, x: np.ndarray, indices: np.ndarray, values: np.ndarray, dim: int
    ) -> np.ndarray:
        """A copy of ``x`` with ``values`` added at ``indices`` along ``dim`` (repeats sum)."""
        out = np.array(x, copy=True)
        key: Any = (slice(None),) * dim + (indices,)
        np.add.at(out, key, values)
        return out

    @staticmethod
    def _along(indices: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
        # full index grids: ``indices`` on ``dim``, the position itself on every other axis
        grids = np.ogrid[tuple(slice(0, n) for n in indices.shape)]
        return tuple(indices if d == dim else g for d, g in enumerate(grids))

    def gather(self, x: np.ndarray, indices: np.ndarray, dim: int) -> np.ndarray:
        return np.asarray(x[self._along(indices, dim)])

    def scatter_add(
        self, x: np.ndarray, indices: np.ndarray, values: np.ndarray, dim: int
    ) -> np.ndarray:
        """A copy of ``x`` with ``values[i]`` added at ``indices[i]`` along ``dim``."""
        out = np.array(x, copy=True)
        np.add.at(out, self._along(indices, dim), values[tuple(slice(0, n) for n in indices.shape)])
        return out

    def slice_assign(self, x: np.ndarray, values: np.ndarray, key: Any) -> np.ndarray:
        out = np.array(x, copy=True)
        out[key] = values
        return out

    def flip(self, x: np.ndarray, dims: Sequence[int]) -> np.ndarray:
        return np.flip(x, axis=tuple(dims))

    def repeat_dim(self, x: np.ndarray, dim: int, times: int) -> np.ndarray:
        reps = [1] * x.ndim
        reps[dim] = times
        return np.tile(x, reps)

    def tril(self, x: np.ndarray, diagonal: int) -> np.ndarray:
        return np.tril(x, diagonal)

    def triu(self, x: np.ndarray, diagonal: int) -> np.ndarray:
        return np.triu(x, diagonal)

    def argsort(self, x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
        """Stable: equal values keep their order, in both directions (int64 indices)."""
        if not descending:
            return np.argsort(x, axis=dim, kind="stable")
        # sorting the reversed input and reversing the result keeps ties in input order
        n = x.shape[dim]
        rev = np.argsort(np.flip(x, axis=dim), axis=dim, kind="stable")
        return np.asarray(n - 1 - np.flip(rev, axis=dim))

    def sort(self, x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
        if not descending:
            return np.sort(x, axis=dim, kind="stable")
        return np.take_along_axis(x, self.argsort(x, dim, True), axis=dim)

    def var(self, x: np.ndarray, dim: int, correction: int) -> np.ndarray:
        n = x.shape[dim]
        # as PyTorch: divided by max(n - correction, 0), so n <= correction gives inf (nan where
        # the sum is 0), without a NumPy warning
        with np.errstate(divide="ignore", invalid="ignore"):
            d = x - np.divide(x.sum(axis=dim, keepdims=True), x.dtype.type(n))
            return np.divide(
                (d * d).sum(axis=dim, keepdims=True), x.dtype.type(max(n - correction, 0))
            )

    def prod_dim(self, x: np.ndarray, dim: int) -> np.ndarray:
        return x.prod(axis=dim, keepdims=True)

    def cumprod(self, x: np.ndarray, dim: int) -> np.ndarray:
        return np.cumprod(x, axis=dim, dtype=x.dtype)

    def cumsum(self, x: np.ndarray, dim: int) -> np.ndarray:
        return np.cumsum(x, axis=dim, dtype=x.dtype)

    floor = staticmethod(np.floor)
    ceil = staticmethod(np.ceil)

    def round(self, x: np.ndarray) -> np.ndarray:
        """Half to even, like PyTorch and Burn."""
        return np.round(x)

    # ---------------------------------------------------------------- nn kernels
    # Activations, fused softmax / normalisation / loss / attention rows, convolution and pooling
    # (ember/ops/activation.py, nn.py, conv.py). Each forward has a ``*_backward`` partner that
    # returns what the row's rule needs; each pair has a direct PyTorch equivalent (F.conv2d and
    # its grads, F.softmax, F.layer_norm, ...). Shapes and ranges were checked by ember.nn.
    relu = staticmethod(_act.relu)
    relu_backward = staticmethod(_act.relu_backward)  # (grad, out): grad where out > 0
    sigmoid = staticmethod(_act.sigmoid)
    softplus = staticmethod(_act.softplus)
    gelu = staticmethod(_act.gelu)  # (x, approximate "none" | "tanh")
    gelu_backward = staticmethod(_act.gelu_backward)  # (grad, x, approximate)

    def silu(self, x: np.ndarray) -> np.ndarray:
        return x * _act.sigmoid(x)

    silu_backward = staticmethod(_act.silu_backward)  # (grad, x)
    softmax = staticmethod(_softmax.softmax)  # (x, dim)
    log_softmax = staticmethod(_softmax.log_softmax)  # (x, dim)
    # fused backwards (families/fused.py): row-blocked on the kernel pool, 1.5-1.8x faster than
    # the rows' generic rules on (1024, 512) float32 (bench/fused_backward.py)
    softmax_backward = staticmethod(_softmax.softmax_backward)  # (grad, out, dim)
    log_softmax_backward = staticmethod(_softmax.log_softmax_backward)  # (grad, out, dim)
    # (logits (R, C), target (R,), ignore_index, label_smoothing) -> (R, 2): per-row loss (0 on
    # ignored rows) and the row's logsumexp; backward (grad (R, 2), logits, target, out, ...)
    cross_entropy = staticmethod(_softmax.cross_entropy)
    cross_entropy_backward = staticmethod(_softmax.cross_entropy_backward)  # -> grad of logits
    # (logits (R, C), probs (R, C), label_smoothing) -> (R,); backward -> (grad logits, probs)
    cross_entropy_soft = staticmethod(_softmax.cross_entropy_soft)
    cross_entropy_soft_backward = staticmethod(_softmax.cross_entropy_soft_backward)
    nll_loss = staticmethod(_softmax.nll_loss)  # (logp (R, C), target (R,), ignore_index) -> (R,)
    nll_loss_backward = staticmethod(_softmax.nll_loss_backward)  # (grad, target, C, ignore_index)
    binary_cross_entropy = staticmethod(_bce.bce)  # (p, target), elementwise
    binary_cross_entropy_backward = staticmethod(_bce.bce_backward)  # -> (grad p, grad target)
    binary_cross_entropy_with_logits = staticmethod(_bce.bce_with_logits)  # (x, t, pos_weight)
    # (x, weight, bias, normalized_ndim, eps); layer norm's fused backward takes its row sums as
    # dot products (kernels/norm.py); the RMS norm backward is the row's own rule
    layer_norm = staticmethod(_norm.layer_norm)
    layer_norm_backward = staticmethod(_norm.layer_norm_backward)  # fused
    rms_norm = staticmethod(_norm.rms_norm)  # (x, weight, normalized_ndim, eps)
    batch_norm = staticmethod(_norm.batch_norm)  # (x, weight, bias, eps): batch statistics, dim 1
    batch_norm_backward = staticmethod(_norm.batch_norm_backward)  # fused: 3 arrays, not ~10
    batch_stats = staticmethod(_norm.batch_stats)  # (x, correction) -> (mean, var), (C,) each
    # (q, k, v, bias, keep, scale, is_causal); a 0-d bias / keep means none; the forward and the
    # fused backward run one batch share per pool thread (kernels/attention.py)
    attention = staticmethod(_attn.attention)
    attention_weights = staticmethod(_attn.attention_weights)  # (q, k, bias, scale, is_causal)
    attention_backward = staticmethod(_attn.attention_backward)  # fused
    # (x, weight, bias, stride, padding, dilation, groups), pairs of ints
    conv2d = staticmethod(_conv.conv2d)
    conv2d_backward = staticmethod(_conv.conv2d_backward)  # -> (gx, gw, gb), None where unneeded
    conv_transpose2d = staticmethod(_conv.conv_transpose2d)
    conv_transpose2d_backward = staticmethod(_conv.conv_transpose2d_backward)
    max_pool2d = staticmethod(_pooling.max_pool2d)  # (x, kernel_size, stride, padding, dilation)
    max_pool2d_backward = staticmethod(_pooling.max_pool2d_backward)  # (grad, x, ...)
    max_pool2d_indices = staticmethod(_pooling.max_pool2d_indices)  # int64 argmax
    avg_pool2d = staticmethod(_pooling.avg_pool2d)  # (x, kernel_size, stride, padding)
    avg_pool2d_backward = staticmethod(_pooling.avg_pool2d_backward)  # (grad, input_shape, ...)
    adaptive_avg_pool2d = staticmethod(_pooling.adaptive_avg_pool2d)  # (x, output_size)
    adaptive_avg_pool2d_backward = staticmethod(_pooling.adaptive_avg_pool2d_backward)

    def embedding(self, indices: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return np.take(weight, indices, axis=0)

    embedding_backward = staticmethod(_emb.embedding_backward)  # (grad, indices, num_embeddings)

    def adam_many(
        self,
        params: list[np.ndarray],
        grads: list[np.ndarray],
        exp_avgs: list[np.ndarray] | None,
        exp_avg_sqs: list[np.ndarray] | None,
        step: int,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        decoupled: bool,
        donate_moments: bool = False,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        args = (params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps)
        out = _adam.adam_many(*args, weight_decay, decoupled, donate_moments)
        if out is None:  # mixed or half-precision dtypes: the generic kernel
            return super().adam_many(*args, weight_decay, decoupled, donate_moments)
        return out
