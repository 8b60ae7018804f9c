"""Quantized tensors: int8 values with float32 scales (SEMANTICS.md §11, API.md "Quantization").

``t.quantize(scheme)`` (``QuantizeMethods``, a mixin of ``Tensor``) turns a float tensor into a
``QuantizedTensor``: int8 ``values``, float32 ``scales`` (and int32 zero points for affine
schemes) of the same rank, each scale axis either 1 (shared along that axis), the axis's size
(one scale per index: the channel axis) or the axis's size / block (the block axis). A quantized
tensor is a constant to autodiff: it never carries a node, ``require_grad()``,
``set_require_grad()`` and ``detach()`` return it unchanged, and an op that takes it next to
tracked float operands gives gradients to those only.

Layout ops (reshape, permute, transpose, slicing, select, cat; ``qlayout.py``) keep the
quantization, the scales following the values. ``matmul`` / ``F.linear`` / ``F.embedding`` take a
quantized weight (``qops.py``). Every other ``Tensor`` method raises ``DTypeError`` naming the op
and saying to ``dequantize()`` first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..dtype import DType, float32, int8, int32
from ..errors import DTypeError, ShapeError
from . import checks
from .base import TensorBase
from .qlayout import QuantizedLayoutMethods, _make
from .qlayout import cat as _cat
from .qscheme import QuantScheme

if TYPE_CHECKING:
    from .device import Device
    from .tensor import Tensor

_Strategy = GradientCheckpointingStrategy


class QuantizedDTypeError(DTypeError, AttributeError):
    """A Tensor method a quantized tensor lacks: a ``DTypeError`` that ``hasattr`` and
    ``getattr(q, name, default)`` read as a missing attribute, as Python expects."""


def unsupported(op: str, cls: type[DTypeError] = DTypeError) -> DTypeError:
    """The error of an op that does not take quantized operands."""
    return cls(
        f"{op}: expected a float tensor, got a quantized int8 tensor (QuantizedTensor). Only "
        "layout ops (reshape, permute, transpose, slicing, select, cat), matmul, F.linear and "
        "F.embedding take quantized operands; call q.dequantize() first."
    )


class QuantizedTensor(QuantizedLayoutMethods):
    """int8 values with float32 scales (and zero points); a constant to autodiff.

    Made by ``t.quantize(scheme)``; ``dequantize()`` gives a float tensor of the original dtype.
    ``dtype`` is the stored int dtype (``em.int8``); ``scheme`` the ``QuantScheme`` (with the
    channel axis where layout ops moved it).

    Example:
        >>> q = em.tensor([[0.5, -1.0], [2.0, 0.25]]).quantize(em.QuantScheme())
        >>> q.dtype, q.shape, q.is_quantized()
        (ember.int8, (2, 2), True)
        >>> q.dequantize().tolist()
        [[0.5039370059967041, -1.0078740119934082], [2.0, 0.25196850299835205]]
    """

    __slots__ = (
        "__weakref__",
        "_axis",
        "_float",
        "_scales",
        "_scheme",
        "_strategy",
        "_values",
        "_zeros",
    )
    __hash__ = object.__hash__

    _values: Tensor  # int8, plain
    _scales: Tensor  # float32, plain, same rank as the values
    _zeros: Tensor | None  # int32 zero points (affine), shaped like the scales
    _scheme: QuantScheme
    _axis: int | None  # the channel or block axis
    _float: DType  # the dtype dequantize() gives back
    _strategy: _Strategy | None

    # ------------------------------------------------------------------ reading
    @property
    def shape(self) -> tuple[int, ...]:
        return self._values.shape

    @property
    def ndim(self) -> int:
        return self._values.ndim

    @property
    def dtype(self) -> DType:
        """The stored int dtype (``em.int8``); ``dequantize()`` gives the original float."""
        return self._values.dtype

    @property
    def scheme(self) -> QuantScheme:
        s = self._scheme
        c = s.channel_axis
        if c is not None and self._axis is not None and c != self._axis:
            return s._with_axis(self._axis)
        return s

    @property
    def axis(self) -> int | None:
        """The axis whose slices (channel) or blocks have their own scales; ``None``: one."""
        return self._axis

    @property
    def float_dtype(self) -> DType:
        """The float dtype ``dequantize()`` returns (the quantized tensor's source dtype)."""
        return self._float

    @property
    def device(self) -> Device:
        return self._values._hardware._with(self._strategy)

    def numel(self) -> int:
        return self._values.numel()

    def is_quantized(self) -> bool:
        return True

    def nbytes(self) -> int:
        """Bytes held: int8 values, float32 scales and int32 zero points."""
        n = self._values.numel() + 4 * self._scales.numel()
        return n + (4 * self._zeros.numel() if self._zeros is not None else 0)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise ShapeError("len: a 0-d tensor has no length.")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        ctx = "" if self._strategy is None else f", autodiff={self._strategy.name}"
        return (
            f"QuantizedTensor(shape={self.shape}, {self.scheme!r}, from={self._float.name}, "
            f"device={self._values._hardware}{ctx})"
        )

    # ------------------------------------------------------------------ dequantize
    def dequantize(self) -> Tensor:
        """A fresh untracked float tensor of the original dtype: ``(values - zero) * scale``."""
        v = self._values.cast(float32)
        if self._zeros is not None:
            v = v - _expand(self._zeros, _block(self), self._axis).cast(float32)
        out = v * _expanded_scales(self)
        if self._float is not float32:
            out = out.cast(self._float)
        if self._strategy is not None:
            out = out.autodiff().with_gradient_checkpointing_strategy(self._strategy)
        return out

    @property
    def _ckpt_strategy(self) -> _Strategy | None:  # the internal API's name, as on Tensor
        return self._strategy

    @property
    def _hardware(self) -> Device:
        return self._values._hardware

    # ------------------------------------------------------------------ autodiff context (§11)
    def is_autodiff(self) -> bool:
        return self._strategy is not None

    def is_tracked(self) -> bool:
        """Always False: a quantized tensor never carries a node."""
        return False

    def is_require_grad(self) -> bool:
        return False

    def gradient_checkpointing_strategy(self) -> _Strategy | None:
        return self._strategy

    def require_grad(self) -> QuantizedTensor:
        """Returns this tensor unchanged: quantized tensors have no gradients (§11)."""
        return self

    def set_require_grad(self, flag: bool) -> QuantizedTensor:
        """Returns this tensor unchanged, for either ``flag`` (§11)."""
        if not isinstance(flag, bool):
            raise DTypeError(f"set_require_grad: expected a bool, got {type(flag).__name__}.")
        return self

    def detach(self) -> QuantizedTensor:
        """Returns this tensor unchanged: it has no history to cut (§11)."""
        return self

    def grad(self, grads: Any) -> None:
        """``None``: a quantized tensor has no gradient (it is a constant to autodiff)."""
        return None

    def grad_remove(self, grads: Any) -> None:
        return None

    def autodiff(self) -> QuantizedTensor:
        """Plain -> autodiff (strategy ``Disabled``); autodiff -> unchanged. Still never tracked."""
        return self if self._strategy is not None else _with_context(self, _Strategy.Disabled)

    def without_autodiff(self) -> QuantizedTensor:
        return self if self._strategy is None else _with_context(self, None)

    inner = without_autodiff

    def with_gradient_checkpointing_strategy(self, strategy: _Strategy) -> QuantizedTensor:
        if self._strategy is None:
            raise unsupported("with_gradient_checkpointing_strategy") from None
        if not isinstance(strategy, _Strategy):
            raise DTypeError(
                "with_gradient_checkpointing_strategy: expected a GradientCheckpointingStrategy, "
                f"got {strategy!r}."
            )
        return _with_context(self, strategy)

    def to_device(self, device: Device) -> QuantizedTensor:
        """Values, scales and zero points moved to ``device``; context and scheme kept."""
        from .device import Device

        if not isinstance(device, Device):
            raise DTypeError(f"to_device: expected an em.Device, got {type(device).__name__}.")
        if device._plain is self._values._hardware:
            return self
        d = device._plain
        zeros = None if self._zeros is None else self._zeros.to_device(d)
        return _make(self._values.to_device(d), self._scales.to_device(d), zeros, self, self._axis)

    @staticmethod
    def cat(tensors: Any, dim: int = 0) -> QuantizedTensor:
        """Join quantized tensors of one scheme along ``dim`` (``Tensor.cat`` does the same)."""
        return _cat(tensors, dim)

    # ------------------------------------------------------------------ products: qops.py
    def __matmul__(self, other: Any) -> Tensor:
        from .qops import matmul

        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        from .qops import matmul

        return matmul(other, self)

    def matmul(self, other: Any) -> Tensor:
        """``self @ other``: see ``ember/_core/qops.py`` (int8 products with int32 sums)."""
        from .qops import matmul

        return matmul(self, other)

    # ------------------------------------------------------------------ every other op
    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__") or not any(hasattr(c, name) for c in _tensor_classes()):
            raise AttributeError(f"'QuantizedTensor' object has no attribute {name!r}")
        if name.startswith("_"):  # an op's internals reached for the raw array
            raise unsupported("an op", QuantizedDTypeError)
        raise unsupported(name, QuantizedDTypeError)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NoReturn:
        raise unsupported("__array__ (np.asarray)")

    def __bool__(self) -> NoReturn:
        raise unsupported("bool")

    def __float__(self) -> NoReturn:
        raise unsupported("float")

    def __int__(self) -> NoReturn:
        raise unsupported("int")

    def __index__(self) -> NoReturn:
        raise unsupported("__index__")


def _tensor_classes() -> tuple[type, ...]:
    """The classes ``Tensor`` is made of (its methods), without importing tensor.py."""
    from .context import ContextMethods
    from .elementwise import ElementwiseMethods
    from .index import IndexMethods
    from .layout import LayoutMethods
    from .linalg import LinalgMethods
    from .reading import ReadingMethods
    from .reduce import ReduceMethods

    return (
        ReadingMethods,
        ContextMethods,
        ElementwiseMethods,
        LinalgMethods,
        LayoutMethods,
        IndexMethods,
        ReduceMethods,
        TensorBase,
    )


def _refuse(op: str) -> Any:
    def method(self: QuantizedTensor, *args: Any) -> NoReturn:
        raise unsupported(op)

    method.__name__ = op
    return method


for _op, _names in {
    "add": ("__add__", "__radd__"),
    "sub": ("__sub__", "__rsub__"),
    "mul": ("__mul__", "__rmul__"),
    "div": ("__truediv__", "__rtruediv__"),
    "pow": ("__pow__", "__rpow__"),
    "neg": ("__neg__",),
    "abs": ("__abs__",),
    "equal": ("__eq__",),
    "not_equal": ("__ne__",),
    "greater": ("__gt__",),
    "greater_equal": ("__ge__",),
    "lower": ("__lt__",),
    "lower_equal": ("__le__",),
    "~": ("__invert__",),
    "&": ("__and__", "__rand__"),
    "|": ("__or__", "__ror__"),
}.items():
    for _name in _names:
        setattr(QuantizedTensor, _name, _refuse(_op))


def _with_context(q: QuantizedTensor, strategy: _Strategy | None) -> QuantizedTensor:
    out = _make(q._values, q._scales, q._zeros, q, q._axis)
    out._strategy = strategy
    return out


def _block(q: QuantizedTensor) -> int | None:
    return q._scheme.block


def _expanded_scales(q: QuantizedTensor) -> Tensor:
    """The scales broadcastable against the values (a block axis repeated ``block`` times)."""
    return _expand(q._scales, _block(q), q._axis)


def _expand(s: Tensor, k: int | None, d: int | None) -> Tensor:
    if k is None or k == 1 or d is None:
        return s
    shape = s.shape
    # (.., nb, ..) -> (.., nb, k, ..) -> (.., nb * k, ..)
    s = s.unsqueeze_dim(d + 1).expand((*shape[: d + 1], k, *shape[d + 1 :]))
    return s.reshape((*shape[:d], shape[d] * k, *shape[d + 1 :]))


def from_parts(
    values: Tensor,
    scales: Tensor,
    zeros: Tensor | None,
    scheme: QuantScheme,
    float_dtype: DType,
    axis: int | None,
) -> QuantizedTensor:
    """A quantized tensor from its stored parts (records load them), checked for consistency."""
    n = values.ndim
    if values.dtype is not int8 or scales.dtype is not float32 or scales.ndim != n:
        raise DTypeError(
            f"quantized tensor: expected int8 values and float32 scales of the same rank, got "
            f"{values.dtype.name} {values.shape} and {scales.dtype.name} {scales.shape}."
        )
    if (zeros is not None) != scheme.is_affine or (
        zeros is not None and (zeros.dtype is not int32 or zeros.shape != scales.shape)
    ):
        raise DTypeError(
            f"quantized tensor: a {scheme.mode} scheme expects "
            + (
                "int32 zero points shaped like the scales."
                if scheme.is_affine
                else "no zero points."
            )
        )
    like = object.__new__(QuantizedTensor)
    like._scheme, like._float, like._strategy = scheme, float_dtype, None
    q = _make(values, scales, zeros, like, axis)
    k = _block(q)
    for i, (size, sd) in enumerate(zip(values.shape, scales.shape)):
        want = (size // k if k is not None and i == axis else size, 1)
        if sd not in want or (k is not None and i == axis and size % k):
            raise ShapeError(
                f"quantized tensor: scales {scales.shape} do not fit values {values.shape} "
                f"({scheme!r}, axis {axis})."
            )
    return q


# ---------------------------------------------------------------------- quantize
def quantize(x: Tensor, scheme: QuantScheme) -> QuantizedTensor:
    """``x`` as int8 values with float32 scales under ``scheme`` (see ``QuantScheme``).

    Symmetric: ``s = max|x| / 127`` per group, ``q = round(x / s)`` in [-127, 127]. Affine:
    ``lo = min(min x, 0)``, ``hi = max(max x, 0)``, ``s = (hi - lo) / 255``,
    ``z = -128 - round(lo / s)``, ``q = round(x / s) + z`` in [-128, 127]. A group of zeros gets
    scale 1. Rounding is half to even on every backend; the work is done in float32.
    """
    if not isinstance(scheme, QuantScheme):
        raise DTypeError(
            f"quantize: expected an em.QuantScheme, got {type(scheme).__name__}. Example: "
            "t.quantize(em.QuantScheme(granularity=('channel', 0)))."
        )
    if not x.dtype.is_float:
        raise DTypeError(
            f"quantize: expected a float tensor, got {x.dtype.name}. Convert with .float() first."
        )
    shape = x.shape
    n = len(shape)
    g = scheme.granularity
    xv = x.without_autodiff()
    x32 = xv if xv.dtype is float32 else xv.cast(float32)
    axis: int | None = None
    if g == "tensor":
        groups = x32.reshape((1, -1)) if n else x32.reshape((1, 1))
        keep = (1,) * n
    elif scheme.channel_axis is not None:
        if n == 0:
            raise ShapeError("quantize: a per-channel scheme needs a tensor of rank >= 1, got 0-d.")
        axis = checks.dim("quantize", scheme.channel_axis, n)
        perm = (axis, *(i for i in range(n) if i != axis))
        groups = x32.permute(perm).reshape((shape[axis], -1))
        keep = tuple(shape[axis] if i == axis else 1 for i in range(n))
    else:
        k = scheme.block or 1
        if n == 0 or shape[-1] % k:
            raise ShapeError(
                f"quantize: a block size of {k} must divide the last dim, got shape {shape}. "
                "Pick a block size that divides it, or pad the tensor."
            )
        axis = n - 1
        groups = x32.reshape((-1, k))
        keep = (*shape[:-1], shape[-1] // k)
    scale, zero = _scales(groups, scheme)
    scale = scale.reshape(keep)
    zeros = None if zero is None else zero.reshape(keep).without_autodiff()
    v = (x32 / _expand(scale, scheme.block, axis)).round()
    if zeros is not None:
        v = v + _expand(zeros, scheme.block, axis).cast(float32)
    values = v.clamp(scheme.qmin, scheme.qmax).cast(int8).without_autodiff()
    like = object.__new__(QuantizedTensor)
    like._scheme, like._float, like._strategy = scheme, x.dtype, x._ckpt_strategy
    return _make(values, scale.without_autodiff(), zeros, like, axis)


def _scales(groups: Tensor, scheme: QuantScheme) -> tuple[Tensor, Tensor | None]:
    """Per-row scale (G,) and int32 zero point (G,) or None of a (G, M) float32 tensor."""
    if groups.shape[1] == 0:
        ones = groups.sum_dim(1).reshape((-1,)) + 1.0
        return ones, (ones.cast(int32) * 0 if scheme.is_affine else None)
    if not scheme.is_affine:
        amax = groups.abs().max_dim(1).reshape((-1,))
        s = amax / _exactly(127.0, amax)
        return s.mask_fill(amax == 0.0, 1.0), None
    lo = groups.min_dim(1).reshape((-1,)).clamp_max(0.0)
    hi = groups.max_dim(1).reshape((-1,)).clamp_min(0.0)
    s = (hi - lo) / _exactly(255.0, hi)
    s = s.mask_fill(s == 0.0, 1.0)
    z = (-128.0 - (lo / s).round()).clamp(-128, 127).cast(int32)
    return s, z


def _exactly(d: float, like: Tensor) -> Tensor:
    """``d`` as a 0-d tensor on ``like``'s device: division by it is correctly rounded on every
    backend (torch's CUDA kernels multiply by the reciprocal of a Python-number divisor, which
    can be an ulp off, and the scales would differ from NumPy's)."""
    return type(like).full((), d, dtype=like.dtype, device=like._hardware)


class QuantizeMethods:
    """``quantize`` and ``is_quantized`` of ``Tensor`` (a float tensor is never quantized)."""

    __slots__ = ()

    def quantize(self, scheme: QuantScheme) -> QuantizedTensor:
        """This float tensor as int8 values with float32 scales; never tracked.

        Example:
            >>> w = em.tensor([[1.0, -2.0], [0.5, 0.25]])
            >>> q = w.quantize(em.QuantScheme(granularity=("channel", 0)))
            >>> q.dequantize().tolist()
            [[1.0, -2.0], [0.5, 0.25]]
        """
        assert isinstance(self, TensorBase)
        return quantize(self, scheme)  # type: ignore[arg-type]

    def is_quantized(self) -> bool:
        """False: a ``Tensor`` holds its values; ``quantize`` gives a ``QuantizedTensor``."""
        return False
