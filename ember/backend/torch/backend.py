"""The PyTorch backend: raw arrays are ``torch.Tensor`` on CPU or one CUDA device.

ember's own autodiff drives every backward pass; torch's autograd is never involved. No method
creates a tensor that requires grad, and ``asarray``/``receive`` detach foreign tensors, so torch
records no graph for any kernel here. Fused backward passes call the ATen backward kernels
directly (``torch.ops.aten.*_backward``).

Semantics mirror the NumPy backend exactly (dtypes of results, 0-d results, Python scalars never
upcasting a tensor), so the same op rows and backward rules run unchanged on both.

Example:
    >>> import ember as em
    >>> x = em.Tensor.ones((2, 3), device=em.Device.torch("cpu"))
    >>> (x * 2).sum().item()
    12.0
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch

from ... import dtype as dt
from ...dtype import DType
from ...errors import DeviceError
from ..base import Backend, RngState
from ..registry import register_backend
from .kernels import activations as _act
from .kernels import attention as _attn
from .kernels import bce as _bce
from .kernels import conv as _conv
from .kernels import cudnn_rnn as _rnn
from .kernels import embedding as _emb
from .kernels import int8_gemm as _int8
from .kernels import int8_weight as _int8w
from .kernels import linear_ce as _lce
from .kernels import norm as _norm
from .kernels import ordered as _ordered
from .kernels import pooling as _pooling
from .kernels import softmax as _softmax

Shape = tuple[int, ...]
Tensor = torch.Tensor

_TO_TORCH: dict[DType, torch.dtype] = {
    dt.float16: torch.float16,
    dt.bfloat16: torch.bfloat16,
    dt.float32: torch.float32,
    dt.float64: torch.float64,
    dt.int8: torch.int8,
    dt.int32: torch.int32,
    dt.int64: torch.int64,
    dt.bool_: torch.bool,
}
_FROM_TORCH: dict[torch.dtype, DType] = {v: k for k, v in _TO_TORCH.items()}
_TO_NP: dict[torch.dtype, np.dtype] = {
    torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.int8: np.dtype(np.int8),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.bool: np.dtype(np.bool_),
}
_NP_BF16 = np.dtype(ml_dtypes.bfloat16)
_HALF = (torch.float16, torch.bfloat16)
_BASIC_KEYS = frozenset({int, slice, type(None), type(Ellipsis)})


def _placement(where: str) -> torch.device:
    """Validate ``where`` ("cpu" or "cuda:i") now, so an unusable device fails at construction."""
    if where == "cpu":
        return torch.device("cpu")
    if not (where.startswith("cuda:") and where[5:].isdigit()):
        raise DeviceError(
            f"Device.torch: expected 'cpu', 'cuda' or 'cuda:i', got {where!r}. "
            "Example: Device.torch('cuda:0')."
        )
    if not torch.cuda.is_available():
        raise DeviceError(
            f"Device.torch: expected a CUDA device for {where!r}, but this PyTorch "
            f"({torch.__version__}) sees none. Use Device.torch('cpu') or Device.cpu(), or "
            "install a CUDA build of PyTorch on a machine with an NVIDIA GPU."
        )
    index = int(where[5:])
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(
            f"Device.torch: expected a CUDA index below {count}, got {where!r}. "
            f"Pick one of cuda:0 .. cuda:{count - 1}."
        )
    return torch.device("cuda", index)


def _np_view(a: np.ndarray) -> Tensor:
    """A CPU torch tensor sharing ``a``'s memory where torch allows it, else a copy of it."""
    if a.dtype == _NP_BF16:
        return _np_view(a.view(np.int16)).view(torch.bfloat16)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.writeable or any(s < 0 for s in a.strides):
        # torch refuses negative strides and warns on read-only memory
        a = np.array(a, copy=True)
    return torch.from_numpy(a)


def _tensor_np_view(x: Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor (bfloat16 through ``ml_dtypes``)."""
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(_NP_BF16)
    return x.numpy()


@register_backend("torch")
class TorchBackend(Backend):
    """Primitives on ``torch.Tensor`` placed on ``where`` ("cpu" or "cuda:i").

    Raises:
        DeviceError: when ``where`` names a CUDA device that this machine or PyTorch build lacks.
    """

    name = "torch"
    array_type = torch.Tensor

    def __init__(self, where: str = "cpu") -> None:
        super().__init__(where)
        self.device = _placement(where)
        self.is_cuda = self.device.type == "cuda"
        if self.is_cuda:
            # an H200 runs ~650 bf16 TFLOP/s of GEMM against ~4 TB/s over memory: one element
            # (2-4 bytes) read or written costs ~400 flop-equivalents, and a kernel's
            # launch and ramp (~3 us) ~2e9 of them
            self.pass_cost = 400.0
            self.op_cost = 2e9
        self.rng = torch.Generator(device=self.device)
        self.rng.seed()

    # ---------------------------------------------------------------- storage
    def from_numpy(self, a: np.ndarray, dtype: DType | None = None) -> Tensor:
        a = np.asarray(a)
        if dtype is not None:
            a = a.astype(_TO_NP[_TO_TORCH[dtype]], copy=False)
        return _np_view(a).to(self.device, copy=True)

    def to_numpy(self, x: Tensor) -> np.ndarray:
        if x.device.type != "cpu":
            return _tensor_np_view(x.cpu())
        return np.array(_tensor_np_view(x), copy=True)

    def dtype_of(self, x: Tensor) -> DType:
        return _FROM_TORCH[x.dtype]

    # dispatch calls it on every op: the method descriptor skips torch's argument parser
    is_float = staticmethod(Tensor.is_floating_point)
    # float tensors keep their dtype for a Python scalar operand in torch kernels
    scalar_ok = staticmethod(Tensor.is_floating_point)

    def asarray(self, x: Any) -> Tensor:
        if isinstance(x, torch.Tensor):
            return x.detach().to(self.device)
        return _np_view(np.asarray(x)).to(self.device)

    def cast(self, x: Tensor, dtype: DType) -> Tensor:
        return x.to(_TO_TORCH[dtype])

    def full(self, shape: Shape, value: float | int | bool, dtype: DType) -> Tensor:
        return torch.full(shape, value, dtype=_TO_TORCH[dtype], device=self.device)

    def empty(self, shape: Shape, dtype: DType) -> Tensor:
        return torch.empty(shape, dtype=_TO_TORCH[dtype], device=self.device)

    def arange(self, start: int, end: int, step: int, dtype: DType) -> Tensor:
        return torch.arange(start, end, step, dtype=_TO_TORCH[dtype], device=self.device)

    def copy(self, x: Tensor) -> Tensor:
        return x.clone(memory_format=torch.contiguous_format)

    def seed(self, n: int) -> None:
        self.rng.manual_seed(n)

    def _sample_dtype(self, dtype: DType) -> torch.dtype:
        # 16-bit floats are sampled in float32 and rounded, as the NumPy backend does
        t = _TO_TORCH[dtype]
        return torch.float32 if t in _HALF else t

    def uniform(self, shape: Shape, lo: float, hi: float, dtype: DType) -> Tensor:
        out = torch.empty(shape, dtype=self._sample_dtype(dtype), device=self.device)
        return out.uniform_(lo, hi, generator=self.rng).to(_TO_TORCH[dtype])

    def normal(self, shape: Shape, mean: float, std: float, dtype: DType) -> Tensor:
        out = torch.empty(shape, dtype=self._sample_dtype(dtype), device=self.device)
        return out.normal_(mean, std, generator=self.rng).to(_TO_TORCH[dtype])

    def bernoulli(self, shape: Shape, p: float, dtype: DType) -> Tensor:
        t = _TO_TORCH[dtype]
        if t.is_floating_point:  # one kernel, written in the mask's own dtype
            return torch.empty(shape, dtype=t, device=self.device).bernoulli_(p, generator=self.rng)
        u = torch.rand(shape, generator=self.rng, device=self.device)
        return (u < p).to(t)

    def rng_state(self) -> RngState:
        raw = bytes(self.rng.get_state().cpu().numpy().tobytes())
        return {"torch": base64.b64encode(raw).decode("ascii")}

    def set_rng_state(self, state: RngState) -> None:
        raw = np.frombuffer(base64.b64decode(state["torch"]), dtype=np.uint8).copy()
        self.rng.set_state(torch.from_numpy(raw))

    # ---------------------------------------------------------------- engine helpers
    def sum_to_shape(self, x: Tensor, shape: Shape) -> Tensor:
        """Sum a broadcast gradient back to ``shape``."""
        src = x.shape
        if src == shape:
            return x
        lead = len(src) - len(shape)
        inner = None
        if 1 in shape:  # broadcast size-1 dims of the target, summed with keepdim
            inner = [i + lead for i, n in enumerate(shape) if n == 1 and src[i + lead] != 1]
        if not inner:  # only leading dims (a bias gradient)
            if lead == 0:
                return x
            if x.is_cuda and x.dtype in _HALF and x.is_contiguous() and x.numel():
                # CUDA's sum over many rows stages a buffer 4x a bf16 input (128 MiB for
                # (16384, 1024), held at the GPT-2 step's backward peak); a GEMV with a ones row
                # needs none
                k = math.prod(shape)
                ones = torch.ones((1, x.numel() // k), dtype=x.dtype, device=x.device)
                return torch.matmul(ones, x.reshape(-1, k)).reshape(shape)
            return torch.sum(x, list(range(lead)))
        out = torch.sum(x, list(range(lead)) + inner, keepdim=True)
        if lead:
            out = out.reshape(shape)
        return out

    def zeros_like(self, x: Tensor) -> Tensor:
        return torch.zeros_like(x, memory_format=torch.contiguous_format)

    def ones_like(self, x: Tensor) -> Tensor:
        return torch.ones_like(x, memory_format=torch.contiguous_format)

    def index_put_zeros(self, shape: Shape, key: Any, values: Tensor) -> Tensor:
        out = torch.zeros(shape, dtype=values.dtype, device=values.device)
        out[self._key(key)] = values
        return out

    def _key(self, key: Any) -> Any:
        """An index key with NumPy arrays and scalars turned into torch tensors and ints."""
        if type(key) is tuple:
            for k in key:
                if type(k) not in _BASIC_KEYS:
                    break
            else:  # ints, slices, None, ...: what basic indexing keys hold, taken as they are
                return key
        if isinstance(key, tuple):
            return tuple(self._key(k) for k in key)
        if isinstance(key, np.ndarray):
            return _np_view(key).to(self.device)
        if isinstance(key, np.integer):
            return int(key)
        return key

    # ---------------------------------------------------------------- elementwise
    add = staticmethod(torch.add)
    sub = staticmethod(torch.sub)
    mul = staticmethod(torch.mul)
    div = staticmethod(torch.div)
    floor_divide = staticmethod(torch.floor_divide)
    remainder = staticmethod(torch.remainder)
    neg = staticmethod(torch.neg)
    exp = staticmethod(torch.exp)
    log = staticmethod(torch.log)
    log1p = staticmethod(torch.log1p)
    sqrt = staticmethod(torch.sqrt)
    sin = staticmethod(torch.sin)
    cos = staticmethod(torch.cos)
    tanh = staticmethod(torch.tanh)
    abs = staticmethod(torch.abs)
    sign = staticmethod(torch.sign)
    erf = staticmethod(torch.erf)
    recip = staticmethod(torch.reciprocal)
    equal = staticmethod(torch.eq)
    not_equal = staticmethod(torch.ne)
    greater = staticmethod(torch.gt)
    greater_equal = staticmethod(torch.ge)
    lower = staticmethod(torch.lt)
    lower_equal = staticmethod(torch.le)
    logical_not = staticmethod(torch.logical_not)
    logical_and = staticmethod(torch.logical_and)
    logical_or = staticmethod(torch.logical_or)
    powf = staticmethod(torch.pow)

    def powf_scalar(self, x: Tensor, value: float) -> Tensor:
        if value == 2:
            return torch.square(x)
        return torch.pow(x, value)

    def powi_scalar(self, x: Tensor, value: int) -> Tensor:
        if value == 2:
            return torch.square(x)
        if value < 0 and not x.is_floating_point():
            return torch.pow(x.to(torch.float32), value)
        return torch.pow(x, value)

    def clamp(self, x: Tensor, min: float | None, max: float | None) -> Tensor:
        if min is None and max is None:
            return x
        return torch.clamp(x, min, max)

    where = staticmethod(torch.where)

    def scalar(self, value: float | int | bool, like: Tensor) -> float | int | bool:
        """``value`` as a Python scalar of ``like``'s kind; torch never upcasts a tensor for it."""
        if like.dtype == torch.bool:
            return bool(value)
        if like.is_floating_point():
            return float(value)
        return int(value)

    # ---------------------------------------------------------------- reductions
    sum = staticmethod(torch.sum)

    def sum_dim(self, x: Tensor, dim: int) -> Tensor:
        return torch.sum(x, dim, keepdim=True)

    mean = staticmethod(torch.mean)

    def mean_dim(self, x: Tensor, dim: int) -> Tensor:
        return torch.mean(x, dim, keepdim=True)

    def max_dim(self, x: Tensor, dim: int) -> Tensor:
        return torch.amax(x, dim, keepdim=True)

    def min_dim(self, x: Tensor, dim: int) -> Tensor:
        return torch.amin(x, dim, keepdim=True)

    def argmax(self, x: Tensor, dim: int) -> Tensor:
        return torch.argmax(x, dim, keepdim=True)

    def argmin(self, x: Tensor, dim: int) -> Tensor:
        return torch.argmin(x, dim, keepdim=True)

    take_along_dim = staticmethod(torch.take_along_dim)

    def put_along_dim_zeros(self, shape: Shape, idx: Tensor, values: Tensor, dim: int) -> Tensor:
        out = torch.zeros(shape, dtype=values.dtype, device=values.device)
        return out.scatter_(dim, idx, values)

    # ---------------------------------------------------------------- linalg
    def matmul(self, x: Tensor, y: Tensor) -> Tensor:
        if x.is_cuda and not x.is_floating_point():
            # cuBLAS has no integer GEMM; float64 is exact below 2**53
            return torch.matmul(x.to(torch.float64), y.to(torch.float64)).to(x.dtype)
        return torch.matmul(x, y)

    def int8_matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """int8 (M, K) @ (K, N) -> int32 with int32 accumulation (``torch._int_mm``).

        On CUDA ``_int_mm`` needs M > 16 and K, N multiples of 8; other shapes are padded
        with zero rows and columns (which add nothing), so every product takes the int8 GEMM.
        """
        if not a.is_cuda:
            return torch._int_mm(a.contiguous(), b.contiguous())
        if _int8.available(a, b):  # Triton's GEMM: 1.19x _int_mm's rate on an H200
            return _int8.int8_gemm(a, _column_major(b))
        m, k = a.shape
        n = b.shape[1]
        pm, pk, pn = _int_mm_padding(m, k, n)
        if pm or pk or pn:
            a = torch.nn.functional.pad(a, (0, pk, 0, pm))
            b = torch.nn.functional.pad(b, (0, pn, 0, pk))
        # cuBLASLt's int8 GEMM wants the right operand column-major: a row-major one takes a
        # slower path (0.18x bf16 measured on an H200 with row-major, bench/RESULTS.md); one
        # transposed copy, unmeasured on a GPU yet
        out = torch._int_mm(a.contiguous(), _column_major(b))
        return out[:m, :n] if pm or pn else out

    def int8_matmul_scaled(self, a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor) -> Tensor:
        """float32 ``(a @ b) * (scale_a * scale_b)``; the scales applied in the epilogue of the
        Triton GEMM where it takes the product (one pass: no int32 result to re-read)."""
        if _int8.available(a, b):
            return _int8.int8_gemm(a, _column_major(b), scale_a, scale_b)
        return self.int8_matmul(a, b).to(torch.float32) * (scale_a * scale_b)

    chunk_logsumexp = staticmethod(_lce.chunk_logsumexp)

    def ce_chunk_grad(
        self, z: Tensor, lse: Tensor, t: Tensor, g: Tensor, lo: int, keep: float, smooth: float,
        dtype: Any,
    ) -> Tensor:  # fmt: skip
        """linear_cross_entropy's chunk logit gradient (kernels/linear_ce.py: Triton on CUDA)."""
        return _lce.ce_chunk_grad(z, lse, t, g, lo, keep, smooth, _TO_TORCH[dtype])

    def int8_weight_linear(self, x: Tensor, w: Tensor, s: Tensor) -> Tensor:
        """``(x @ w^T) * s^T``, int8 ``w`` dequantized inside a Triton GEMM on CUDA for
        bf16/fp16 ``x`` (kernels/int8_weight.py); otherwise ``w`` converted to ``x``'s dtype."""
        if _int8w.available(x, w.t()):
            return _int8w.int8_weight_gemm(x, w.t(), s.t())
        return torch.matmul(x, w.t().to(x.dtype)) * s.t().to(x.dtype)

    def linear(self, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        """x @ w^T + b as one addmm; a 0-d ``b`` means no bias."""
        return torch.nn.functional.linear(x, w, b if b.ndim else None)

    # ---------------------------------------------------------------- movement
    # plain torch functions: no Python frame on the hot layout ops (expand: its attr is `shape`)
    reshape = staticmethod(torch.reshape)
    permute = staticmethod(torch.permute)

    @staticmethod
    def expand(x: Tensor, shape: Sequence[int]) -> Tensor:
        return x.expand(shape)

    def index(self, x: Tensor, key: Any) -> Tensor:
        return x[self._key(key)]

    def cat(self, xs: Sequence[Tensor], dim: int) -> Tensor:
        return torch.cat(list(xs), dim)

    def stack(self, xs: Sequence[Tensor], dim: int) -> Tensor:
        return torch.stack(list(xs), dim)

    def split_sizes(self, x: Tensor, sizes: Sequence[int], dim: int) -> list[Tensor]:
        return list(x.split_with_sizes(list(sizes), dim))  # no Python layers of torch.split

    # ---------------------------------------------------------------- with a Python scalar
    @staticmethod
    def add_scalar(x: Tensor, value: Any) -> Tensor:
        return torch.add(x, value)

    @staticmethod
    def sub_scalar(x: Tensor, value: Any) -> Tensor:
        return torch.sub(x, value)

    @staticmethod
    def mul_scalar(x: Tensor, value: Any) -> Tensor:
        return torch.mul(x, value)

    @staticmethod
    def div_scalar(x: Tensor, value: Any) -> Tensor:
        return torch.div(x, value)

    @staticmethod
    def rsub_scalar(x: Tensor, value: Any) -> Tensor:
        return torch.rsub(x, value)

    def rdiv_scalar(self, x: Tensor, value: float) -> Tensor:
        # a CPU 0-d numerator: exact value / x (not value * (1 / x)), no device transfer
        try:
            num = torch.scalar_tensor(value, dtype=x.dtype)
        except RuntimeError:  # beyond the dtype's range: round to +-inf as IEEE casts do
            num = torch.scalar_tensor(value, dtype=torch.float64).to(x.dtype)
        return torch.div(num, x)

    # ---------------------------------------------------------------- transfers
    def receive(self, x: Any, source: Any) -> Tensor:
        """``x``, an array of backend ``source``, as a tensor here.

        NumPy arrays and CPU tensors are shared without a copy (``torch.from_numpy``) when the
        destination is the CPU; other moves use ``Tensor.to`` or DLPack.
        """
        if source is self:
            return x
        if isinstance(x, torch.Tensor):
            return x.to(self.device)
        if isinstance(x, np.ndarray):
            return _np_view(x).to(self.device)
        if hasattr(x, "__dlpack__"):
            return torch.from_dlpack(x).to(self.device)
        return _np_view(source.to_numpy_view(x)).to(self.device)

    def to_numpy_view(self, x: Tensor) -> np.ndarray:
        """A NumPy array of ``x``'s values, sharing memory for CPU tensors."""
        if x.device.type != "cpu":
            x = x.cpu()
        return _tensor_np_view(x)

    # ---------------------------------------------------------------- indexing, shape, sorting
    def select(self, x: Tensor, indices: Tensor, dim: int) -> Tensor:
        flat = indices.reshape(-1)
        out = torch.index_select(x, dim, flat)
        if indices.ndim == 1:
            return out
        # (..., N, ...) -> (..., *indices.shape, ...), as np.take does
        return out.reshape((*x.shape[:dim], *indices.shape, *x.shape[dim + 1 :]))

    def select_add(self, x: Tensor, indices: Tensor, values: Tensor, dim: int) -> Tensor:
        """A copy of ``x`` with ``values`` added at ``indices`` along ``dim`` (repeats sum).

        On CUDA in one order on every call (``kernels/ordered.py``); the CPU's ``index_add_`` is
        serial, and 3.6x faster along a later dim."""
        flat = indices.reshape(-1)
        values = values.reshape((*x.shape[:dim], flat.numel(), *x.shape[dim + 1 :]))
        if x.is_cuda:
            return _ordered.ordered_index_add_(x.clone(), dim, flat, values)
        return x.clone().index_add_(dim, flat, values)

    def gather(self, x: Tensor, indices: Tensor, dim: int) -> Tensor:
        return torch.gather(x, dim, indices)

    def scatter_add(self, x: Tensor, indices: Tensor, values: Tensor, dim: int) -> Tensor:
        """A copy of ``x`` with ``values[i]`` added at ``indices[i]`` along ``dim`` (on CUDA in
        one order on every call: ``kernels/ordered.py``)."""
        if x.is_cuda:
            return _ordered.ordered_scatter_add_(x.clone(), dim, indices, values)
        return x.clone().scatter_add_(dim, indices, values)

    def slice_assign(self, x: Tensor, values: Tensor, key: Any) -> Tensor:
        out = x.clone()
        out[self._key(key)] = values
        return out

    def flip(self, x: Tensor, dims: Sequence[int]) -> Tensor:
        return torch.flip(x, tuple(dims))

    def repeat_dim(self, x: Tensor, dim: int, times: int) -> Tensor:
        reps = [1] * x.ndim
        reps[dim] = times
        return x.repeat(reps)

    tril = staticmethod(torch.tril)
    triu = staticmethod(torch.triu)

    def argsort(self, x: Tensor, dim: int, descending: bool) -> Tensor:
        """Stable: equal values keep their input order in both directions (int64 indices)."""
        return torch.sort(x, dim=dim, descending=descending, stable=True).indices

    def sort(self, x: Tensor, dim: int, descending: bool) -> Tensor:
        return torch.sort(x, dim=dim, descending=descending, stable=True).values

    def var(self, x: Tensor, dim: int, correction: int) -> Tensor:
        n = x.shape[dim]
        if n > correction:
            return torch.var(x, dim, correction=correction, keepdim=True)
        # n <= correction: torch's divisor max(n - correction, 0) gives inf (nan where the sum is
        # 0), here without its warning, as the NumPy backend does
        d = x - torch.mean(x, dim, keepdim=True)
        return torch.sum(d * d, dim, keepdim=True) / max(n - correction, 0)

    def prod_dim(self, x: Tensor, dim: int) -> Tensor:
        return torch.prod(x, dim, keepdim=True)

    def cumprod(self, x: Tensor, dim: int) -> Tensor:
        if x.dtype == torch.bool:
            return torch.cummin(x.to(torch.uint8), dim).values.to(torch.bool)
        return torch.cumprod(x, dim, dtype=x.dtype)

    def cumsum(self, x: Tensor, dim: int) -> Tensor:
        if x.dtype == torch.bool:
            return torch.cummax(x.to(torch.uint8), dim).values.to(torch.bool)
        return torch.cumsum(x, dim, dtype=x.dtype)

    floor = staticmethod(torch.floor)
    ceil = staticmethod(torch.ceil)

    def round(self, x: Tensor) -> Tensor:
        """Half to even, like NumPy."""
        return torch.round(x)

    # ---------------------------------------------------------------- nn kernels (kernels/)
    relu = staticmethod(_act.relu)
    relu_backward = staticmethod(_act.relu_backward)
    sigmoid = staticmethod(_act.sigmoid)
    softplus = staticmethod(_act.softplus)
    gelu = staticmethod(_act.gelu)
    gelu_backward = staticmethod(_act.gelu_backward)
    silu = staticmethod(_act.silu)
    silu_backward = staticmethod(_act.silu_backward)
    softmax = staticmethod(_softmax.softmax)
    log_softmax = staticmethod(_softmax.log_softmax)
    softmax_backward = staticmethod(_softmax.softmax_backward)
    log_softmax_backward = staticmethod(_softmax.log_softmax_backward)
    cross_entropy = staticmethod(_softmax.cross_entropy)
    cross_entropy_backward = staticmethod(_softmax.cross_entropy_backward)
    cross_entropy_soft = staticmethod(_softmax.cross_entropy_soft)
    cross_entropy_soft_backward = staticmethod(_softmax.cross_entropy_soft_backward)
    nll_loss = staticmethod(_softmax.nll_loss)
    nll_loss_backward = staticmethod(_softmax.nll_loss_backward)
    binary_cross_entropy = staticmethod(_bce.bce)
    binary_cross_entropy_backward = staticmethod(_bce.bce_backward)
    binary_cross_entropy_with_logits = staticmethod(_bce.bce_with_logits)
    layer_norm = staticmethod(_norm.layer_norm)
    layer_norm_backward = staticmethod(_norm.layer_norm_backward)
    rms_norm = staticmethod(_norm.rms_norm)
    batch_norm = staticmethod(_norm.batch_norm)
    batch_norm_backward = staticmethod(_norm.batch_norm_backward)
    batch_stats = staticmethod(_norm.batch_stats)
    attention = staticmethod(_attn.attention)
    attention_weights = staticmethod(_attn.attention_weights)
    attention_backward = staticmethod(_attn.attention_backward)
    attention_draws_dropout = staticmethod(_attn.draws_dropout)
    attention_dropout_backward = staticmethod(_attn.attention_dropout_backward)

    def attention_dropout(
        self, q: Tensor, k: Tensor, v: Tensor, scale: float, is_causal: bool, dropout_p: float
    ) -> tuple[Tensor, tuple[Any, ...]]:
        return _attn.attention_dropout(q, k, v, scale, is_causal, dropout_p, self.rng)

    def lstm_layer_takes(self, x: Tensor) -> bool:
        return _rnn.takes(x)

    def lstm_layer_fused(
        self, x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor, h0: Tensor,
        c0: Tensor, reverse: bool,
    ) -> tuple[Tensor, tuple[Any, ...]] | None:  # fmt: skip
        """cuDNN's whole-layer LSTM on CUDA (kernels/cudnn_rnn.py); ``None`` elsewhere."""
        if not _rnn.takes(x):
            return None
        return _rnn.forward(x, w_ih, w_hh, b_ih, b_hh, h0, c0, "lstm", reverse)

    lstm_layer_fused_backward = staticmethod(_rnn.lstm_backward)

    def recurrent_layer_takes(self, x: Tensor, mode: str) -> bool:
        return _rnn.takes_mode(x, mode)

    def recurrent_layer_fused(
        self, x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor, h0: Tensor,
        mode: str, reverse: bool,
    ) -> tuple[Tensor, tuple[Any, ...]] | None:  # fmt: skip
        """cuDNN's whole-layer GRU / Elman RNN on CUDA (kernels/cudnn_rnn.py) for a mode verified
        on a device; else ``None``."""
        if not _rnn.takes_mode(x, mode):
            return None
        return _rnn.forward(x, w_ih, w_hh, b_ih, b_hh, h0, None, mode, reverse)

    recurrent_layer_fused_backward = staticmethod(_rnn.layer_backward)

    conv2d = staticmethod(_conv.conv2d)
    conv2d_backward = staticmethod(_conv.conv2d_backward)
    conv_transpose2d = staticmethod(_conv.conv_transpose2d)
    conv_transpose2d_backward = staticmethod(_conv.conv_transpose2d_backward)
    max_pool2d = staticmethod(_pooling.max_pool2d)
    max_pool2d_backward = staticmethod(_pooling.max_pool2d_backward)
    max_pool2d_indices = staticmethod(_pooling.max_pool2d_indices)  # int64 argmax
    avg_pool2d = staticmethod(_pooling.avg_pool2d)
    avg_pool2d_backward = staticmethod(_pooling.avg_pool2d_backward)
    adaptive_avg_pool2d = staticmethod(_pooling.adaptive_avg_pool2d)
    adaptive_avg_pool2d_backward = staticmethod(_pooling.adaptive_avg_pool2d_backward)

    embedding = staticmethod(_emb.embedding)
    embedding_backward = staticmethod(_emb.embedding_backward)

    # ---------------------------------------------------------------- optional kernels
    # one split_sizes call makes the views of several pieces faster than indexing each one
    split_views = split_sizes

    def clip_norm_many(
        self, grads: list[Tensor], max_norm: float, eps: float
    ) -> tuple[list[Tensor], Tensor]:
        """Gradients scaled by ``min(1, max_norm / (norm + eps))`` and their global L2 norm.

        Everything stays on the device (a clamp, no branch on the norm), so nothing is read
        back; the inputs are left unchanged.
        """
        norms = torch._foreach_norm(grads)
        total = torch.linalg.vector_norm(torch.stack(norms))
        factor = torch.clamp(max_norm / (total + eps), max=1.0)
        return list(torch._foreach_mul(grads, factor)), total

    def adam_many(
        self,
        params: list[Tensor],
        grads: list[Tensor],
        exp_avgs: list[Tensor] | None,
        exp_avg_sqs: list[Tensor] | None,
        step: int,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        decoupled: bool,
        donate_moments: bool = False,
    ) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
        """One Adam / AdamW step of many parameters with ``torch._foreach`` kernels.

        Returns new parameters and moments, the same values as ``ember.optim.Adam.update`` per
        parameter. The inputs are left unchanged, except the moments with ``donate_moments``
        (the caller holds their only references): the fused kernel then updates them in place.
        ``exp_avgs`` / ``exp_avg_sqs`` are ``None`` on the first step.
        """
        if _fusable(params, grads):
            return self._adam_fused(
                params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay,
                decoupled, donate_moments,
            )  # fmt: skip
        # the multi-tensor fast path needs matching dense layouts (a linear layer's weight
        # gradient arrives transposed); otherwise torch falls back to one kernel per tensor
        params = [p.contiguous() for p in params]
        grads = [g.contiguous() for g in grads]
        if weight_decay and decoupled:
            params = list(torch._foreach_mul(params, 1.0 - lr * weight_decay))
        elif weight_decay:
            grads = list(torch._foreach_add(grads, params, alpha=weight_decay))
        if exp_avgs is None or exp_avg_sqs is None:
            m = torch._foreach_mul(grads, 1.0 - beta1)
            v = torch._foreach_mul(grads, grads)
            torch._foreach_mul_(v, 1.0 - beta2)
        else:
            m = torch._foreach_mul(exp_avgs, beta1)
            torch._foreach_add_(m, grads, alpha=1.0 - beta1)
            v = torch._foreach_mul(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(v, grads, grads, value=1.0 - beta2)
        # the update: lr / (1 - b1^t) times m over (sqrt(v) / sqrt(1 - b2^t) + eps)
        denom = torch._foreach_sqrt(v)
        torch._foreach_mul_(denom, 1.0 / math.sqrt(1.0 - beta2**step))
        torch._foreach_add_(denom, eps)
        new = torch._foreach_addcdiv(params, m, denom, value=-lr / (1.0 - beta1**step))
        return list(new), list(m), list(v)

    def _adam_fused(
        self,
        params: list[Tensor],
        grads: list[Tensor],
        exp_avgs: list[Tensor] | None,
        exp_avg_sqs: list[Tensor] | None,
        step: int,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        decoupled: bool,
        donate_moments: bool,
    ) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
        """``adam_many`` through ATen's fused Adam / AdamW kernel (one pass over all tensors).

        The kernel updates in place, so it runs on a copy of the parameters (one multi-tensor
        copy): ember's tensors are values. The moments are copied too unless donated.
        """
        grads = [g.contiguous() for g in grads]
        new = list(torch._foreach_mul([p.contiguous() for p in params], 1.0))
        if exp_avgs is None or exp_avg_sqs is None:
            m = [torch.zeros_like(p) for p in new]
            v = [torch.zeros_like(p) for p in new]
        elif donate_moments and all(t.is_contiguous() for t in (*exp_avgs, *exp_avg_sqs)):
            m, v = list(exp_avgs), list(exp_avg_sqs)
        else:
            m = list(torch._foreach_mul(exp_avgs, 1.0))
            v = list(torch._foreach_mul(exp_avg_sqs, 1.0))
        # the kernel reads the step count (its bias corrections) from a device tensor; under
        # em.capture the count (and the rate) are device tensors already: nothing is baked in
        if isinstance(step, Tensor):
            t = step.to(torch.float32)
        else:
            t = torch.full((), float(step), dtype=torch.float32, device=self.device)
        fused = torch._fused_adamw_ if decoupled else torch._fused_adam_
        fused(
            new, grads, m, v, [], [t] * len(new), lr=lr, beta1=beta1, beta2=beta2,
            weight_decay=weight_decay, eps=eps, amsgrad=False, maximize=False,
        )  # fmt: skip
        return new, m, v


def _column_major(b: Tensor) -> Tensor:
    """``b`` with column-major strides (``b.t()`` contiguous), copied only when it is not."""
    return b if b.stride(0) == 1 and b.stride(1) == b.shape[0] else b.t().contiguous().t()


def _int_mm_padding(m: int, k: int, n: int) -> tuple[int, int, int]:
    """Zero rows/columns that make (M, K) @ (K, N) fit CUDA's ``_int_mm``: M > 16, K and N
    multiples of 8."""
    return max(0, 17 - m), -k % 8, -n % 8


_FUSED_ADAM_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _fusable(params: list[Tensor], grads: list[Tensor]) -> bool:
    """Whether ATen's fused Adam takes these: one float dtype shared by parameters and grads."""
    if not params or not hasattr(torch, "_fused_adamw_"):
        return False
    dtype = params[0].dtype
    if dtype not in _FUSED_ADAM_DTYPES:
        return False
    return all(p.dtype == dtype for p in params) and all(g.dtype == dtype for g in grads)
