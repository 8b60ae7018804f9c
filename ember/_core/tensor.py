"""The ``Tensor`` class: an immutable value with its own autodiff context.

A tensor holds a raw backend array, its hardware device, and an autodiff context: ``None``
(plain) or a checkpointing strategy plus an optional graph node (SEMANTICS.md §1-§2). Every method
returns a new tensor; none changes the receiver.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..autodiff.backprop import backward_of
from ..autodiff.gradients import Gradients
from ..autodiff.node import Node
from ..autodiff.requirement import Requirement
from ..checkpoint.strategy import GradientCheckpointingStrategy
from ..dtype import DType, as_dtype, bool_, float32, int64
from ..errors import AutodiffError, DTypeError, ShapeError
from ..ops import OPS
from . import checks
from . import dispatch as _dispatch
from . import layout as _layout
from . import math as _math
from . import reductions as _reduce
from . import select as _select
from . import shaping as _shaping
from . import sorting as _sorting
from . import stats as _stats
from .advanced import index_with_tensors
from .creation import fill_value as _fill_value
from .device import Device
from .dispatch import apply, apply2, as_scalar, binary, cast, record, scalar, wrap
from .hostread import host_read
from .indexing import normalize_key

_GRAD = Requirement.GRAD
_Strategy = GradientCheckpointingStrategy
_ADD, _SUB, _MUL, _DIV = OPS["add"], OPS["sub"], OPS["mul"], OPS["div"]
_ADD_S, _SUB_S, _RSUB_S = OPS["add_scalar"], OPS["sub_scalar"], OPS["rsub_scalar"]
_MUL_S, _DIV_S, _RDIV_S = OPS["mul_scalar"], OPS["div_scalar"], OPS["rdiv_scalar"]
_MATMUL, _INDEX = OPS["matmul"], OPS["index"]


def _check_gradients(op: str, grads: object) -> None:
    if not isinstance(grads, Gradients):
        hint = (
            " For parameter-keyed gradients use grads.get(param.id)."
            if type(grads).__name__ == "GradientsParams"
            else ""
        )
        raise DTypeError(
            f"{op}: expected the Gradients returned by backward(), got {type(grads).__name__}."
            + hint
        )


class Tensor:
    """An n-dimensional array on a device, plain or associated with autodiff.

    Example:
        >>> x = Tensor.ones((2, 2), device=Device.cpu().autodiff()).require_grad()
        >>> grads = x.powf_scalar(2.0).sum().backward()
        >>> x.grad(grads).tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """

    __slots__ = ("__weakref__", "_data", "_dev", "_node", "_strategy")
    __hash__ = object.__hash__  # identity; == is elementwise
    __array_priority__ = 1000  # make ndarray <op> Tensor defer to Tensor

    _data: Any
    _dev: Device
    _strategy: _Strategy | None
    _node: Node | None
    # the internal API's names for the first three (aliases of the slots, set below the class):
    # what modules above the core read (ember/_core/internal.py)
    _raw: Any
    _hardware: Device
    _ckpt_strategy: _Strategy | None

    def __init__(self, data: Any, *, device: Device | None = None, dtype: Any = None) -> None:
        from .creation import from_data

        t = from_data(data, device=device, dtype=dtype)
        self._data, self._dev, self._strategy, self._node = t._data, t._dev, t._strategy, None

    # ------------------------------------------------------------------ creation
    @staticmethod
    def zeros(shape: Any, *, device: Device | None = None, dtype: Any = float32) -> Tensor:
        """Zeros of ``shape``."""
        from .creation import full

        return full(shape, 0, device=device, dtype=dtype, op="zeros")

    @staticmethod
    def ones(shape: Any, *, device: Device | None = None, dtype: Any = float32) -> Tensor:
        """Ones of ``shape``."""
        from .creation import full

        return full(shape, 1, device=device, dtype=dtype, op="ones")

    @staticmethod
    def empty(shape: Any, *, device: Device | None = None, dtype: Any = float32) -> Tensor:
        """Uninitialised values of ``shape``."""
        from .creation import empty

        return empty(shape, device=device, dtype=dtype)

    @staticmethod
    def full(
        shape: Any, value: float | int | bool, *, device: Device | None = None, dtype: Any = None
    ) -> Tensor:
        """``value`` everywhere; dtype float32 for a float, int64 for an int, bool for a bool."""
        from .creation import full

        return full(shape, value, device=device, dtype=dtype, op="full")

    @staticmethod
    def zeros_like(t: Tensor) -> Tensor:
        """Zeros with ``t``'s shape, dtype, device and autodiff context (untracked)."""
        return t._like(0)

    @staticmethod
    def ones_like(t: Tensor) -> Tensor:
        return t._like(1)

    @staticmethod
    def full_like(t: Tensor, value: float | int | bool) -> Tensor:
        return t._like(_fill_value("full_like", value, t.dtype))

    def _like(self, value: float | int | bool) -> Tensor:
        b = self._dev.b
        return wrap(Tensor, b.full(self.shape, value, self.dtype), self._dev, self._strategy)

    @staticmethod
    def from_data(data: Any, *, device: Device | None = None, dtype: Any = None) -> Tensor:
        """A tensor from nested lists, scalars or a NumPy array (copied)."""
        from .creation import from_data

        return from_data(data, device=device, dtype=dtype)

    @staticmethod
    def arange(
        start: int, end: int | None = None, step: int = 1, *, device: Device | None = None
    ) -> Tensor:
        """int64 values ``start, start + step, ...`` below ``end``."""
        from .creation import arange

        return arange(start, end, step, device=device)

    @staticmethod
    def random(
        shape: Any,
        distribution: Any,
        *,
        device: Device | None = None,
        dtype: Any = float32,
        generator: Any = None,
    ) -> Tensor:
        """Samples of ``em.Distribution.uniform/normal/bernoulli``, from ``generator`` (an
        ``em.Generator``) or the device's default generator (seeded by ``em.seed``)."""
        from .creation import random

        return random(shape, distribution, device=device, dtype=dtype, generator=generator)

    @staticmethod
    def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        """Concatenate along ``dim``; every other size must match."""
        from .joining import cat

        return cat(tensors, dim)

    @staticmethod
    def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        """Stack equal-shaped tensors along a new ``dim``."""
        from .joining import stack

        return stack(tensors, dim)

    # ------------------------------------------------------------------ reading
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self) -> DType:
        return self._dev.b.dtype_of(self._data)

    @property
    def device(self) -> Device:
        """The device, wrapped as autodiff with this tensor's strategy when it is autodiff."""
        return self._dev._with(self._strategy)

    def numel(self) -> int:
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    def to_numpy(self) -> np.ndarray:
        """A NumPy copy of the values."""
        host_read("Tensor.to_numpy()")
        return self._dev.b.to_numpy(self._data)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self) -> float | int | bool:
        """The single value as a Python number."""
        host_read("Tensor.item()")
        if self.numel() != 1:
            raise ShapeError(
                f"item: expected a tensor with one element, got shape {self.shape}. "
                "Reduce it first (sum(), mean()) or index one element."
            )
        return self.to_numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.to_numpy().tolist()

    def __repr__(self) -> str:
        body = np.array2string(self.to_numpy(), separator=", ", threshold=64, edgeitems=3)
        ctx = ""
        if self._strategy is not None:
            state = (
                "require_grad"
                if self.is_require_grad()
                else "tracked"
                if self._node
                else "untracked"
            )
            ctx = f", autodiff={self._strategy.name}, {state}"
        return f"Tensor({body}, dtype={self.dtype.name}, device={self._dev}{ctx})"

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise ShapeError("len: a 0-d tensor has no length; use item().")
        return int(self._data.shape[0])

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_float or self.numel() != 1:
            raise DTypeError(
                f"__index__: expected a one-element int tensor, got {self.dtype.name} {self.shape}."
            )
        return int(self.item())

    # ------------------------------------------------------------------ autodiff state
    def is_autodiff(self) -> bool:
        """Associated with autodiff (any dtype)."""
        return self._strategy is not None

    def is_tracked(self) -> bool:
        """Participates in a graph: a require-grad leaf or computed from one."""
        return self._node is not None

    def is_require_grad(self) -> bool:
        """A leaf whose gradient backward keeps."""
        n = self._node
        return n is not None and n.requirement is _GRAD

    def gradient_checkpointing_strategy(self) -> _Strategy | None:
        return self._strategy

    def autodiff(self) -> Tensor:
        """Plain -> autodiff (strategy ``Disabled``, untracked); autodiff -> unchanged."""
        if self._strategy is not None:
            return self
        return wrap(Tensor, self._data, self._dev, _Strategy.Disabled)

    def without_autodiff(self) -> Tensor:
        """Autodiff -> plain tensor with no graph reference; plain -> unchanged."""
        if self._strategy is None:
            return self
        return wrap(Tensor, self._data, self._dev)

    inner = without_autodiff

    def require_grad(self) -> Tensor:
        """Same as ``set_require_grad(True)``."""
        return self.set_require_grad(True)

    def set_require_grad(self, flag: bool) -> Tensor:
        """Mark an untracked autodiff float leaf as require-grad, or cut a tensor from its history.

        ``True``: untracked autodiff float -> require-grad leaf; a require-grad leaf is unchanged.
        ``False``: autodiff float -> a new untracked tensor (still autodiff); plain -> unchanged.
        """
        dt = self.dtype
        if flag:
            if not dt.is_float:
                raise DTypeError(
                    f"set_require_grad: expected a float tensor, got {dt.name}; only float tensors "
                    "have gradients. Convert with .float() first."
                )
            if self._strategy is None:
                raise AutodiffError(
                    "set_require_grad: expected an autodiff tensor, got a plain one. Call "
                    ".autodiff() first (t.autodiff().require_grad()) or create it on an autodiff "
                    "device."
                )
            node = self._node
            if node is None:
                leaf = Node.leaf(self._data, self._dev.b)
                return wrap(Tensor, self._data, self._dev, self._strategy, leaf)
            if node.requirement is _GRAD:
                return self
            raise AutodiffError(
                f"set_require_grad: expected a leaf, got the result of op {node.spec.name!r} "
                "(a tracked non-leaf). ember keeps no intermediate gradients; call .detach() "
                "first to start a new leaf from its value."
            )
        if self._strategy is None or self._node is None:
            return self
        return wrap(Tensor, self._data, self._dev, self._strategy)

    def detach(self) -> Tensor:
        """New lineage: keeps autodiff and a leaf's require-grad; a non-leaf becomes untracked."""
        if self._strategy is None:
            return self
        node = self._node
        if node is not None and node.requirement is _GRAD:
            return wrap(
                Tensor, self._data, self._dev, self._strategy, Node.leaf(self._data, self._dev.b)
            )
        return wrap(Tensor, self._data, self._dev, self._strategy)

    def with_gradient_checkpointing_strategy(self, strategy: _Strategy) -> Tensor:
        """The same tensor (same graph) whose later ops record under ``strategy``."""
        if self._strategy is None:
            raise AutodiffError(
                "with_gradient_checkpointing_strategy: expected an autodiff tensor, got a plain "
                "one. Call .autodiff() first."
            )
        if not isinstance(strategy, _Strategy):
            raise AutodiffError(
                "with_gradient_checkpointing_strategy: expected a GradientCheckpointingStrategy, "
                f"got {strategy!r}."
            )
        return wrap(Tensor, self._data, self._dev, strategy, self._node)

    def to_device(self, device: Device) -> Tensor:
        """Move to ``device``'s hardware, keeping this tensor's autodiff context.

        A tracked tensor's move is differentiable: gradients flow back to the source device.
        Moving to the same hardware returns an equivalent handle.
        """
        if not isinstance(device, Device):
            raise DTypeError(
                f"to_device: expected an em.Device, got {type(device).__name__}. Pass "
                "em.Device.cpu(), em.Device.torch('cpu') or em.Device.cuda()."
            )
        dst = device._plain
        if dst is self._dev:
            return self
        attrs = {"src": self._dev.b, "dst": dst.b}
        out = dst.b.receive(self._data, self._dev.b)
        if self._strategy is None:
            return wrap(Tensor, out, dst)
        return record(OPS["to_device"], (self,), (self._data,), out, attrs, self._strategy, dst)

    # ------------------------------------------------------------------ backward and gradients
    def backward(self) -> Gradients:
        """Backpropagate from this tensor (a non-scalar is seeded with ones) -> ``Gradients``."""
        return backward_of(self, None)  # ember.autodiff.backward(self), less its checks

    def grad(self, grads: Gradients) -> Tensor | None:
        """This require-grad leaf's gradient in ``grads`` (a plain tensor), or ``None``."""
        if not isinstance(grads, Gradients):
            _check_gradients("grad", grads)
        n = self._node
        if n is None or n.requirement is not _GRAD:
            return None
        g = grads.get(n.id)
        if g is None:
            return None
        return wrap(Tensor, g, self._dev)

    def grad_remove(self, grads: Gradients) -> Tensor | None:
        """Pop this leaf's gradient from ``grads`` (``None`` if absent)."""
        if not isinstance(grads, Gradients):
            _check_gradients("grad_remove", grads)
        n = self._node
        if n is None or n.requirement is not _GRAD:
            return None
        g = grads.pop(n.id)
        return None if g is None else wrap(Tensor, g, self._dev)

    def grad_replace(self, grads: Gradients, grad: Tensor) -> None:
        """Set this leaf's entry in ``grads`` to the plain tensor ``grad``."""
        if not isinstance(grads, Gradients):
            _check_gradients("grad_replace", grads)
        if self._strategy is None:
            raise AutodiffError(
                "grad_replace: expected an autodiff tensor, got a plain one; plain tensors have no "
                "gradient entries."
            )
        if grad.is_autodiff():
            raise AutodiffError(
                "grad_replace: expected a plain gradient, got an autodiff tensor. Pass "
                "grad.without_autodiff()."
            )
        n = self._node
        if n is None or n.requirement is not _GRAD:
            raise AutodiffError(
                "grad_replace: expected a require-grad leaf, got a tensor whose gradient is not "
                "kept. Call .require_grad() on the leaf before the forward pass."
            )
        if grad.shape != self.shape:
            raise ShapeError(
                f"grad_replace: expected a gradient of shape {self.shape}, got {grad.shape}."
            )
        grads.put(n.id, grad.to_device(self._dev)._data)

    # ------------------------------------------------------------------ operators
    def add(self, other: Tensor | float) -> Tensor:
        if isinstance(other, Tensor):
            return binary(_ADD, self, other)
        return scalar(_ADD_S, self, other)

    def sub(self, other: Tensor | float) -> Tensor:
        if isinstance(other, Tensor):
            return binary(_SUB, self, other)
        return scalar(_SUB_S, self, other)

    def mul(self, other: Tensor | float) -> Tensor:
        if isinstance(other, Tensor):
            return binary(_MUL, self, other)
        return scalar(_MUL_S, self, other)

    def div(self, other: Tensor | float) -> Tensor:
        """True division; int operands give float32 (like PyTorch)."""
        x = self if self.dtype.is_float else cast(self, float32)
        if isinstance(other, Tensor):
            y = other if other.dtype.is_float else cast(other, float32)
            return binary(_DIV, x, y)
        return scalar(_DIV_S, x, other)

    def add_scalar(self, value: float) -> Tensor:
        return scalar(_ADD_S, self, value)

    def sub_scalar(self, value: float) -> Tensor:
        return scalar(_SUB_S, self, value)

    def mul_scalar(self, value: float) -> Tensor:
        return scalar(_MUL_S, self, value)

    def div_scalar(self, value: float) -> Tensor:
        return self.div(as_scalar("div_scalar", value))

    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div

    def __radd__(self, other: float) -> Tensor:
        return scalar(_ADD_S, self, other)

    def __rsub__(self, other: float) -> Tensor:
        return scalar(_RSUB_S, self, other)

    def __rmul__(self, other: float) -> Tensor:
        return scalar(_MUL_S, self, other)

    def __rtruediv__(self, other: float) -> Tensor:
        x = self if self.dtype.is_float else cast(self, float32)
        return scalar(_RDIV_S, x, other)

    def __pow__(self, other: Tensor | float) -> Tensor:
        if isinstance(other, Tensor):
            return self.powf(other)
        value = as_scalar("pow", other)
        if isinstance(value, int) and not isinstance(value, bool):
            return self.powi_scalar(value)
        return self.powf_scalar(value)

    def __rpow__(self, other: float) -> Tensor:
        base = self.full_like(
            self if self.dtype.is_float else cast(self, float32), as_scalar("pow", other)
        )
        return base.powf(self)

    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product with NumPy/PyTorch semantics: 1-D operands and broadcast batch dims."""
        if not isinstance(other, Tensor):
            raise DTypeError(f"matmul: expected a Tensor operand, got {type(other).__name__}.")
        a, c = self._data, other._data
        if a.ndim == 2 and c.ndim == 2 and a.shape[1] == c.shape[0] and a.dtype == c.dtype:
            return apply2(_MATMUL, self, other)  # fast path: 2-D product (apply2 autocasts it)
        x, y = self, other
        if x.ndim == 0 or y.ndim == 0:
            raise ShapeError(
                f"matmul: expected operands of rank >= 1, got shapes {x.shape} and {y.shape}. "
                "Use * for scaling by a scalar."
            )
        squeeze_l = x.ndim == 1
        squeeze_r = y.ndim == 1
        if squeeze_l:
            x = x.unsqueeze_dim(0)
        if squeeze_r:
            y = y.unsqueeze_dim(-1)
        if x.shape[-1] != y.shape[-2]:
            raise ShapeError(
                f"matmul: inner sizes differ, lhs {self.shape} vs rhs {other.shape}. The last axis "
                "of lhs pairs with the second-to-last of rhs; did you mean rhs.transpose()?"
            )
        checks.broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
        if x.dtype is not y.dtype:
            x, y = _dispatch.unify(_MATMUL, (x, y))
        out = apply(_MATMUL, (x, y), {})
        if squeeze_l:
            out = out.squeeze_dim(-2)
        if squeeze_r:
            out = out.squeeze_dim(-1)
        return out

    __matmul__ = matmul

    def __rmatmul__(self, other: Any) -> Tensor:
        raise DTypeError(f"matmul: expected a Tensor operand, got {type(other).__name__}.")

    # comparisons give bool tensors (and keep the autodiff context, with no node)
    def _compare(self, name: str, other: Any) -> Tensor:
        if isinstance(other, Tensor):
            return binary(OPS[name], self, other)
        v = as_scalar(name, other)
        if type(v) is int and not -(1 << 31) <= v < 1 << 31:  # may not fit an int32 tensor
            v = checks.fit(name, v, self.dtype)
        return apply(OPS[name + "_elem"], (self,), {"value": v})

    def equal(self, other: Tensor | float) -> Tensor:
        return self._compare("equal", other)

    def not_equal(self, other: Tensor | float) -> Tensor:
        return self._compare("not_equal", other)

    def greater(self, other: Tensor | float) -> Tensor:
        return self._compare("greater", other)

    def greater_equal(self, other: Tensor | float) -> Tensor:
        return self._compare("greater_equal", other)

    def lower(self, other: Tensor | float) -> Tensor:
        return self._compare("lower", other)

    def lower_equal(self, other: Tensor | float) -> Tensor:
        return self._compare("lower_equal", other)

    def equal_elem(self, value: float) -> Tensor:
        return self._compare("equal", value)

    def greater_elem(self, value: float) -> Tensor:
        return self._compare("greater", value)

    def lower_elem(self, value: float) -> Tensor:
        return self._compare("lower", value)

    def not_equal_elem(self, value: float) -> Tensor:
        return self._compare("not_equal", value)

    def greater_equal_elem(self, value: float) -> Tensor:
        return self._compare("greater_equal", value)

    def lower_equal_elem(self, value: float) -> Tensor:
        return self._compare("lower_equal", value)

    __eq__ = equal  # type: ignore[assignment]
    __ne__ = not_equal  # type: ignore[assignment]
    __gt__ = greater
    __ge__ = greater_equal
    __lt__ = lower
    __le__ = lower_equal

    def __invert__(self) -> Tensor:
        if not self.dtype.is_bool:
            raise DTypeError(f"~: expected a bool tensor, got {self.dtype.name}.")
        return apply(OPS["logical_not"], (self,), {})

    def __and__(self, other: Tensor) -> Tensor:
        return binary(OPS["logical_and"], self.bool(), other.bool())

    def __or__(self, other: Tensor) -> Tensor:
        return binary(OPS["logical_or"], self.bool(), other.bool())

    # ------------------------------------------------------------------ dtype
    def cast(self, dtype: Any) -> Tensor:
        """Convert to ``dtype`` (differentiable between float dtypes)."""
        return cast(self, as_dtype(dtype))

    def float(self) -> Tensor:
        """float32 (like PyTorch's ``.float()``)."""
        return cast(self, float32)

    def int(self) -> Tensor:
        """int64 (floats truncate toward zero)."""
        return cast(self, int64)

    def bool(self) -> Tensor:
        return cast(self, bool_)

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> Tensor:
        norm = normalize_key(tuple(self._data.shape), key)
        if norm is None:  # int or bool tensors (or lists) in the key
            return index_with_tensors(self, key)
        if not norm:
            return self
        return apply(_INDEX, (self,), {"key": norm})

    def slice(self, ranges: Sequence[builtins.slice | builtins.int] | builtins.slice) -> Tensor:
        """One ``slice`` (or int) per leading dim: ``t.slice([slice(0, 2)]) == t[0:2]``.

        A single ``slice`` stands for a one-element list, as in ``slice_assign``; ``None``,
        lists and index tensors raise ``DTypeError`` (use ``t[...]`` for those).
        """
        return self[_select.slice_key("slice", ranges)]

    # ------------------------------------------------------------------ elementwise math
    neg = _math.neg
    exp = _math.exp
    log = _math.log
    log1p = _math.log1p
    sqrt = _math.sqrt
    sin = _math.sin
    cos = _math.cos
    tanh = _math.tanh
    erf = _math.erf
    abs = _math.abs
    sign = _math.sign
    recip = _math.recip
    __neg__ = _math.neg
    __abs__ = _math.abs
    powf = _math.powf
    powf_scalar = _math.powf_scalar
    powi_scalar = _math.powi_scalar
    clamp = _math.clamp
    clamp_min = _math.clamp_min
    clamp_max = _math.clamp_max
    mask_where = _math.mask_where
    mask_fill = _math.mask_fill

    # ------------------------------------------------------------------ layout
    reshape = _layout.reshape
    permute = _layout.permute
    swap_dims = _layout.swap_dims
    transpose = _layout.transpose
    T = property(_layout.transpose)
    flatten = _layout.flatten
    unsqueeze_dim = _layout.unsqueeze_dim
    squeeze_dim = _layout.squeeze_dim
    expand = _layout.expand

    # ------------------------------------------------------------------ reductions
    sum = _reduce.sum
    sum_dim = _reduce.sum_dim
    mean = _reduce.mean
    mean_dim = _reduce.mean_dim
    max_dim = _reduce.max_dim
    min_dim = _reduce.min_dim
    argmax = _reduce.argmax
    argmin = _reduce.argmin

    # ------------------------------------------------------------- indexing, shaping, sorting
    select = _select.select
    gather = _select.gather
    scatter = _select.scatter
    slice_assign = _select.slice_assign
    flip = _shaping.flip
    repeat_dim = _shaping.repeat_dim
    tril = _shaping.tril
    triu = _shaping.triu
    one_hot = _shaping.one_hot
    narrow = _shaping.narrow
    chunk = _shaping.chunk
    split = _shaping.split
    sort = _sorting.sort
    argsort = _sorting.argsort
    topk = _sorting.topk
    var = _stats.var
    std = _stats.std
    prod = _stats.prod
    prod_dim = _stats.prod_dim
    cumsum = _stats.cumsum
    max = _stats.max
    min = _stats.min
    floor = _stats.floor
    ceil = _stats.ceil
    round = _stats.round


# read-only by convention; an alias reads the slot itself, as fast as the field it names
Tensor._raw = Tensor.__dict__["_data"]
Tensor._hardware = Tensor.__dict__["_dev"]
Tensor._ckpt_strategy = Tensor.__dict__["_strategy"]
