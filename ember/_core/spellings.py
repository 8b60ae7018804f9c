"""PyTorch spellings of ``Tensor`` methods (``SpellingsMethods``, a mixin first in the bases).

PyTorch names with PyTorch behaviour, so code moves over line by line (API.md "PyTorch
spellings"): reductions ``sum/mean/amax/amin/prod/norm(dim=None, keepdim=False)`` with an int or
a tuple of dims, varargs ``view/reshape/permute``, ``transpose(a, b)``, ``unsqueeze``,
``squeeze``, ``size``, ``where``, ``masked_fill``, ``clone``, ``einsum``, ``//`` and ``%``,
``Tensor.randn/rand/randint/randn_like/rand_like``, ``.T`` and ``.mT``. The Burn names
(``sum_dim``, ``unsqueeze_dim``, ``swap_dims`` ...) are unchanged, and the calls both spell alike
(``reshape((2, 3))``, ``permute([1, 0])``, ``sum()``, ``transpose()``) behave as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..dtype import float32, float64, int64, promote
from ..errors import DTypeError, ShapeError
from ..ops import OPS
from . import checks
from . import layout as _layout
from .base import AnyTensor
from .creation import Distribution
from .creation import random as _random
from .dispatch import apply, as_scalar, binary, cast
from .einsum import einsum as _einsum

if TYPE_CHECKING:
    from .tensor import Tensor

_SUM, _MEAN, _RESHAPE = OPS["sum"], OPS["mean"], OPS["reshape"]
_FLOOR_DIVIDE, _REMAINDER = OPS["floor_divide"], OPS["remainder"]
Dims = int | Sequence[int] | None


# ---------------------------------------------------------------- reductions
def _keepdim(op: str, keepdim: Any) -> None:
    if not isinstance(keepdim, bool):
        raise DTypeError(
            f"{op}: keepdim must be a bool, got {keepdim!r}. The signature is PyTorch's "
            f"{op}(dim=None, keepdim=False)."
        )


def _dims(op: str, t: Tensor, dim: Dims) -> tuple[int, ...]:
    """The reduced dims, sorted (None or an empty tuple: all of them)."""
    if t.ndim == 0:
        if dim is not None:
            for d in dim if isinstance(dim, Sequence) else (dim,):
                checks.dim(op, d, 1)  # a 0-d tensor accepts dim 0 or -1, as PyTorch
        return ()
    if dim is None:
        return tuple(range(t.ndim))
    if isinstance(dim, Sequence) and not isinstance(dim, str):
        return tuple(sorted(checks.dims(op, dim, t.ndim))) or tuple(range(t.ndim))
    return (checks.dim(op, dim, t.ndim),)


def _reduce(t: Tensor, op: str, row: str, dim: Dims, keepdim: bool) -> Tensor:
    """``t`` reduced over ``dim`` with the Burn ``_dim`` row ``row`` (which keeps the dim): one
    dim directly, several folded into one trailing dim first (one kernel, PyTorch's rounding)."""
    _keepdim(op, keepdim)
    dims = _dims(op, t, dim)
    if not dims:  # a 0-d tensor: the reduction of one value
        return getattr(t.reshape((1,)), row)(0).reshape(())
    shape = t.shape
    kept = tuple(1 if i in dims else n for i, n in enumerate(shape))
    rest = [i for i in range(t.ndim) if i not in dims]
    if len(dims) == 1:
        out = getattr(t, row)(dims[0])
    else:
        n = math.prod(shape[i] for i in dims)
        folded = t.permute(rest + list(dims)).reshape((*(shape[i] for i in rest), n))
        out = getattr(folded, row)(len(rest))
    return out.reshape(kept if keepdim else tuple(shape[i] for i in rest))


def _counts(t: Tensor) -> Tensor:
    """bool -> int64, as PyTorch's sum and prod count bools."""
    return cast(t, int64) if t.dtype.is_bool else t


def sum(self: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Sum over ``dim`` (an int, a tuple of dims, or None: every element), as PyTorch's ``sum``.

    The reduced dims are dropped unless ``keepdim=True``; bools count as int64. ``sum()`` is the
    0-d total, ``sum_dim(d)`` the Burn form that keeps the dim.

    Example:
        >>> em.tensor([[1.0, 2.0], [3.0, 4.0]]).sum((0, 1)).item()
        10.0
    """
    if dim is None and keepdim is False:
        try:
            return apply(_SUM, (self,), {})
        except DTypeError:  # no cost on the common path; bools count as int64
            if not self.dtype.is_bool:
                raise
            return apply(_SUM, (_counts(self),), {})
    return _reduce(_counts(self), "sum", "sum_dim", dim, keepdim)


def mean(self: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (int, tuple or None), as PyTorch's ``mean`` (float tensors).

    Example:
        >>> em.tensor([[1.0, 2.0], [3.0, 4.0]]).mean(1).tolist()
        [1.5, 3.5]
    """
    if dim is None and keepdim is False:
        return apply(_MEAN, (self,), {})
    return _reduce(self, "mean", "mean_dim", dim, keepdim)


def amax(self: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (int, tuple or None: all), as PyTorch's ``amax``; values only
    (``max(dim)`` gives values and indices). The gradient goes to the first maximum.

    Example:
        >>> em.tensor([[1.0, 5.0], [7.0, 2.0]]).amax(0).tolist()
        [7.0, 5.0]
    """
    _nonempty("amax", self, dim)
    return _reduce(self, "amax", "max_dim", dim, keepdim)


def amin(self: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (int, tuple or None: all), as PyTorch's ``amin``."""
    _nonempty("amin", self, dim)
    return _reduce(self, "amin", "min_dim", dim, keepdim)


def _nonempty(op: str, t: Tensor, dim: Dims) -> None:
    if t.numel() == 0 and any(t.shape[d] == 0 for d in _dims(op, t, dim) or range(t.ndim)):
        raise ShapeError(
            f"{op}: expected a non-empty reduction, got shape {t.shape} reduced over "
            f"{dim!r}; there is nothing to select."
        )


def prod(self: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Product over ``dim`` (int, tuple or None: all; 1 for none), as PyTorch's ``prod``.

    Example:
        >>> em.tensor([[1.0, 2.0], [3.0, 0.5]]).prod(1).tolist()
        [2.0, 1.5]
    """
    x = _counts(self)
    if dim is None and keepdim is False:
        return x.reshape((-1,)).prod_dim(0).reshape(())
    return _reduce(x, "prod", "prod_dim", dim, keepdim)


def norm(self: Tensor, p: float | str = "fro", dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Vector norm over ``dim`` (int, tuple or None: all elements), as PyTorch's ``norm``.

    ``p``: 2 or "fro" (the square root of the sum of squares; its gradient at a zero norm is 0,
    as PyTorch's), 1, ``math.inf``, ``-math.inf``, 0 (the count of non-zeros) or any other
    number (``sum(|x|^p)^(1/p)``). Float tensors.

    Example:
        >>> em.tensor([[3.0, 4.0]]).norm(dim=1).tolist()
        [5.0]
    """
    if not self.dtype.is_float:
        raise DTypeError(
            f"norm: expected a float tensor, got {self.dtype.name}. Convert first with .float()."
        )
    _keepdim("norm", keepdim)
    if p == "fro" or p == 2:
        s = _reduce(self * self, "norm", "sum_dim", dim, keepdim)
        zero = s == 0
        return s.mask_fill(zero, 1.0).sqrt().mask_fill(zero, 0.0)
    if isinstance(p, str) or isinstance(p, bool) or not isinstance(p, (int, float)):
        raise DTypeError(
            f"norm: expected p to be a number or 'fro', got {p!r}. Pass p=2 (the default "
            "Euclidean norm), 1, math.inf ..."
        )
    a = self.abs()
    if p == math.inf:
        return amax(a, dim, keepdim)
    if p == -math.inf:
        return amin(a, dim, keepdim)
    if p == 0:
        return _reduce((a != 0).cast(self.dtype), "norm", "sum_dim", dim, keepdim)
    if p == 1:
        return _reduce(a, "norm", "sum_dim", dim, keepdim)
    return _reduce(a.powf_scalar(float(p)), "norm", "sum_dim", dim, keepdim).powf_scalar(1.0 / p)


# ---------------------------------------------------------------- layout
def _varargs(op: str, args: tuple[Any, ...]) -> Any:
    """``f(2, 3)`` and ``f((2, 3))`` alike: one sequence argument, or the ints themselves."""
    if len(args) == 1 and not isinstance(args[0], int | AnyTensor):
        return args[0]
    if not args:
        raise DTypeError(f"{op}: expected a shape or dims, got no arguments.")
    return args


def reshape(self: Tensor, *shape: Any) -> Tensor:
    """Same values in ``shape``, given as a tuple or as ints (``reshape(2, -1)``); one -1 is
    inferred. ``view`` is the same call (tensors are immutable, so no copy is ever visible).

    Example:
        >>> em.Tensor.ones((2, 3)).reshape(3, 2).shape
        (3, 2)
    """
    if len(shape) == 1 and type(shape[0]) is tuple:  # the Burn spelling: the common call
        return _layout.reshape(self, shape[0])
    return _layout.reshape(self, _varargs("reshape", shape))


def permute(self: Tensor, *dims: Any) -> Tensor:
    """Reorder the axes (``permute(1, 0)`` or ``permute((1, 0))``): axis i is input axis
    ``dims[i]``."""
    return _layout.permute(self, _varargs("permute", dims))


def transpose(self: Tensor, dim0: int | None = None, dim1: int | None = None) -> Tensor:
    """``transpose(a, b)`` swaps two dims (PyTorch); ``transpose()`` the last two (Burn)."""
    if dim0 is None and dim1 is None:
        return _layout.transpose(self)
    if dim0 is None or dim1 is None:
        raise DTypeError(
            f"transpose: expected two dims (transpose(a, b)) or none (the last two), got "
            f"{dim0!r} and {dim1!r}."
        )
    return self.swap_dims(dim0, dim1)


def unsqueeze(self: Tensor, dim: int) -> Tensor:
    """Insert a size-1 axis at ``dim`` (``-1`` appends), as PyTorch's ``unsqueeze``."""
    return self.unsqueeze_dim(dim)


def squeeze(self: Tensor, dim: Dims = None) -> Tensor:
    """Drop size-1 axes, as PyTorch's ``squeeze``: every one (``dim=None``), or those of ``dim``
    (an int or a tuple) that have size 1; a named dim of another size stays."""
    shape = self.shape
    if dim is None:
        drop = {i for i, n in enumerate(shape) if n == 1}
    elif self.ndim == 0:
        _dims("squeeze", self, dim)
        return self
    else:
        named = checks.dims("squeeze", dim, self.ndim) if isinstance(dim, Sequence) else None
        ds = named if named is not None else (checks.dim("squeeze", dim, self.ndim),)  # type: ignore[arg-type]
        drop = {d for d in ds if shape[d] == 1}
    if not drop:
        return self
    return self.reshape(tuple(n for i, n in enumerate(shape) if i not in drop))


def size(self: Tensor, dim: int | None = None) -> Any:
    """The shape (``size()``), or the size of one dim (``size(d)``), as PyTorch's ``size``."""
    if dim is None:
        return self.shape
    return self.shape[checks.dim("size", dim, max(self.ndim, 1) if self.ndim else 0)]


def _T(self: Tensor) -> Tensor:
    """The dims reversed, as PyTorch's ``.T`` (a matrix's transpose; 0-d and 1-d: unchanged)."""
    if self.ndim < 2:
        return self
    if self.ndim == 2:
        return self.swap_dims(0, 1)
    return self.permute(tuple(reversed(range(self.ndim))))


def _mT(self: Tensor) -> Tensor:
    """The last two dims swapped, as PyTorch's ``.mT`` (batches of matrices)."""
    if self.ndim < 2:
        raise ShapeError(
            f"mT: expected a matrix or a batch of matrices (rank >= 2), got shape {self.shape}. "
            "Use .T for a 1-d tensor (unchanged) or unsqueeze(0) first."
        )
    return self.swap_dims(-2, -1)


def clone(self: Tensor) -> Tensor:
    """A new tensor with the same values and autodiff context; a tracked tensor's clone is a
    differentiable copy (a non-leaf), as PyTorch's ``clone``."""
    return apply(_RESHAPE, (self,), {"shape": self.shape})


# ---------------------------------------------------------------- selection
def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``value`` where ``mask`` is true, else ``self``, as PyTorch's ``masked_fill``; ``value``
    is a number or a one-element tensor (then differentiable)."""
    if isinstance(value, AnyTensor):
        if value.numel() != 1:
            raise ShapeError(
                f"masked_fill: expected a number or a one-element tensor as the value, got "
                f"shape {value.shape}. Use where(mask, values, t) for a tensor of values."
            )
        return self.mask_where(mask, value.reshape(()))
    return self.mask_fill(mask, value)


def _operand(op: str, v: Any, like: Tensor) -> Tensor:
    """A tensor operand: ``v`` itself, or a 0-d constant on ``like``'s device."""
    if isinstance(v, AnyTensor):
        return v
    s = as_scalar(op, v)
    if isinstance(s, bool):
        dt = like.dtype
    elif isinstance(s, float):
        dt = like.dtype if like.dtype.is_float else float32
    else:
        dt = like.dtype if not like.dtype.is_bool else int64
    return type(like).full((), s, device=like.device.without_autodiff(), dtype=dt)


def _where(condition: Any, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` is true, else ``other`` (tensors or numbers; broadcast)."""
    if not isinstance(condition, AnyTensor) or not condition.dtype.is_bool:
        got = condition.dtype.name if isinstance(condition, AnyTensor) else type(condition).__name__
        raise DTypeError(
            f"where: expected a bool condition tensor first, got {got}. Build one with a "
            "comparison: Tensor.where(x > 0, x, 0.0)."
        )
    like = input if isinstance(input, AnyTensor) else other
    if not isinstance(like, AnyTensor):
        like = condition
        a = _operand("where", input, condition)
        b = _operand("where", other, a)
    else:
        a, b = _operand("where", input, like), _operand("where", other, like)
    if a.dtype is not b.dtype:
        dt = promote(a.dtype, b.dtype)
        a, b = cast(a, dt), cast(b, dt)
    checks.broadcast_shapes("where", condition.shape, a.shape)
    return b.mask_where(condition, a)


class _Where:
    """``Tensor.where(cond, a, b)`` (``torch.where``) on the class; ``x.where(cond, y)``
    (``torch.Tensor.where``: ``x`` where ``cond`` holds, else ``y``) on a tensor."""

    def __get__(self, obj: Any, owner: Any = None) -> Callable[..., Tensor]:
        if obj is None:
            return _where
        return lambda condition, other: _where(condition, obj, other)


# ---------------------------------------------------------------- arithmetic
def _divmod(op: str, spec: Any, a: Any, b: Any) -> Tensor:
    like = a if isinstance(a, AnyTensor) else b
    x, y = _operand(op, a, like), _operand(op, b, like)
    if not (x.dtype.is_float or y.dtype.is_float):
        _no_int_zero(op, y)
    return binary(spec, x, y)


def _no_int_zero(op: str, y: Tensor) -> None:
    """Integer division by zero has no value: a ``ShapeError`` (NumPy would give 0 silently,
    PyTorch raises ZeroDivisionError). Costs one host read, int operands only."""
    if bool((y == 0).without_autodiff().to_numpy().any()):
        raise ShapeError(
            f"{op}: integer division by zero (the divisor holds a 0). Mask the zeros first, or "
            "divide floats (.float()), where x // 0 is +-inf or nan."
        )


def floor_divide(self: Tensor, other: Tensor | float) -> Tensor:
    """``floor(self / other)``, as Python's and PyTorch's ``//`` (exact for ints; zero
    gradient). Integer division by zero raises ``ShapeError``.

    Example:
        >>> (em.tensor([7, -7]) // 2).tolist()
        [3, -4]
    """
    return _divmod("floor_divide", _FLOOR_DIVIDE, self, other)


def remainder(self: Tensor, other: Tensor | float) -> Tensor:
    """``self - floor_divide(self, other) * other``, the sign of ``other``, as Python's and
    PyTorch's ``%``.

    Example:
        >>> (em.tensor([7, -7]) % 3).tolist()
        [1, 2]
    """
    return _divmod("remainder", _REMAINDER, self, other)


def __rfloordiv__(self: Tensor, other: float) -> Tensor:
    return _divmod("floor_divide", _FLOOR_DIVIDE, other, self)


def __rmod__(self: Tensor, other: float) -> Tensor:
    return _divmod("remainder", _REMAINDER, other, self)


# ---------------------------------------------------------------- random creation
def _size(op: str, size: tuple[Any, ...]) -> Any:
    if len(size) == 1 and not isinstance(size[0], int):
        return size[0]
    return size


def randn(
    cls: type[Tensor], *size: Any, device: Any = None, dtype: Any = float32, generator: Any = None
) -> Tensor:
    """Standard normal samples of ``size`` (ints or one tuple), as ``torch.randn``."""
    dist = Distribution.normal(0.0, 1.0)
    return _random(cls, _size("randn", size), dist, device=device, dtype=dtype, generator=generator)


def rand(
    cls: type[Tensor], *size: Any, device: Any = None, dtype: Any = float32, generator: Any = None
) -> Tensor:
    """Uniform samples in [0, 1) of ``size`` (ints or one tuple), as ``torch.rand``."""
    dist = Distribution.uniform(0.0, 1.0)
    return _random(cls, _size("rand", size), dist, device=device, dtype=dtype, generator=generator)


def randint(
    cls: type[Tensor],
    low: int,
    high: int | None = None,
    size: Any = None,
    *,
    device: Any = None,
    dtype: Any = int64,
    generator: Any = None,
) -> Tensor:
    """Integers uniform in ``[low, high)`` (``randint(high, size)``: from 0), as
    ``torch.randint``."""
    if size is None and isinstance(high, Sequence):  # randint(high, size)
        low, high, size = 0, low, high
    if high is None or size is None:
        raise DTypeError(
            "randint: expected randint(low, high, size) or randint(high, size), got "
            f"low={low!r}, high={high!r}, size={size!r}."
        )
    lo, hi = (checks.int_arg("randint", n, v) for n, v in (("low", low), ("high", high)))
    if not hi > lo:
        raise ShapeError(f"randint: expected low < high, got [{lo}, {hi}).")
    u = _random(
        cls, size, Distribution.uniform(lo, hi), device=device, dtype=float64,
        generator=generator,
    )  # fmt: skip
    return u.floor().clamp(lo, hi - 1).cast(dtype)


def randn_like(t: Tensor, *, generator: Any = None) -> Tensor:
    """Standard normal samples with ``t``'s shape, dtype, device and autodiff context."""
    dist = Distribution.normal(0.0, 1.0)
    return _random(type(t), t.shape, dist, device=t.device, dtype=t.dtype, generator=generator)


def rand_like(t: Tensor, *, generator: Any = None) -> Tensor:
    """Uniform [0, 1) samples with ``t``'s shape, dtype, device and autodiff context."""
    dist = Distribution.uniform(0.0, 1.0)
    return _random(type(t), t.shape, dist, device=t.device, dtype=t.dtype, generator=generator)


class SpellingsMethods:
    """The PyTorch spellings; first in ``Tensor``'s bases, so ``sum``, ``reshape``, ``permute``
    and ``transpose`` take PyTorch's arguments as well as Burn's."""

    __slots__ = ()

    sum = sum
    mean = mean
    amax = amax
    amin = amin
    prod = prod
    norm = norm
    reshape = reshape
    view = reshape
    permute = permute
    transpose = transpose
    unsqueeze = unsqueeze
    squeeze = squeeze
    size = size
    T = property(_T)
    mT = property(_mT)
    clone = clone
    masked_fill = masked_fill
    where = _Where()
    floor_divide = floor_divide
    remainder = remainder
    __floordiv__ = floor_divide
    __mod__ = remainder
    __rfloordiv__ = __rfloordiv__
    __rmod__ = __rmod__
    einsum = staticmethod(_einsum)
    randn = classmethod(randn)
    rand = classmethod(rand)
    randint = classmethod(randint)
    randn_like = staticmethod(randn_like)
    rand_like = staticmethod(rand_like)
