"""Advanced ``[]`` indexing: keys holding int or bool tensors (or lists), as in PyTorch.

Every such key is rewritten into registry ops that already have gradients:

1. the key's ints, slices and ``None`` are applied first (the ``index`` row), advanced entries
   kept whole;
2. the advanced axes are permuted to the front (``permute``), their index arrays broadcast and
   flattened into one row-major index into the merged front axes (``reshape``);
3. ``select`` on dim 0 picks the rows; a final ``reshape`` (and ``permute``) gives PyTorch's
   layout: the broadcast index shape replaces the advanced axes in place when they are adjacent
   once the ints are gone (a slice or ``None`` between them separates them), else it comes first.

A bool tensor stands for the int indices of its true entries (``x[mask]`` selects elements,
flattened). Python ints are basic indices (PyTorch's rule; NumPy would count an int next to a
tensor as a 0-d index and so move ``x[1, :, idx]``'s index dim to the front). The gradient is
``select``'s: a scatter-add back, so repeated indices add up. Index values are read on the host
to check their range and build the flat index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DTypeError, ShapeError
from .base import AnyTensor

if TYPE_CHECKING:
    from .tensor import Tensor

_OP = "index"


def _as_index_array(k: Any) -> np.ndarray:
    """A list or tensor entry of a key as a NumPy int or bool array."""
    if isinstance(k, AnyTensor):
        dt = k.dtype
        if not (dt.is_int or dt.is_bool):
            raise DTypeError(
                f"{_OP}: expected int or bool index tensors, got {dt.name}. Convert indices "
                "with .int() or build a mask with a comparison (t > 0)."
            )
        return k.to_numpy()
    try:
        a = np.asarray(k)
    except (TypeError, ValueError):
        a = np.asarray([], dtype=object)
    if a.size == 0 and a.dtype != object:
        return a.astype(np.int64)  # [] selects nothing
    if a.dtype.kind not in "iub":
        raise DTypeError(
            f"{_OP}: expected a list of ints or bools as an index, got {k!r}. Use int values "
            "(or an em.tensor of int64)."
        )
    return a


def _expand(shape: tuple[int, ...], key: tuple[Any, ...]) -> list[Any]:
    """Entries with lists/tensors as arrays and ``...`` expanded to full slices."""
    entries: list[Any] = []
    used = 0
    n_ellipsis = 0
    for k in key:
        if k is Ellipsis:
            n_ellipsis += 1
            entries.append(k)
        elif k is None:
            entries.append(k)
        elif isinstance(k, slice):
            entries.append(k)
            used += 1
        elif isinstance(k, (AnyTensor, list, tuple)):
            a = _as_index_array(k)
            if a.dtype.kind == "b" and a.ndim == 0:
                raise ShapeError(
                    f"{_OP}: expected a bool mask with at least one dim, got a 0-d bool. "
                    "Use mask_where / mask_fill for scalar conditions."
                )
            entries.append(a)
            used += a.ndim if a.dtype.kind == "b" else 1
        elif isinstance(k, int) and not isinstance(k, bool):
            entries.append(k)
            used += 1
        else:
            raise DTypeError(
                f"{_OP}: expected ints, slices, None, ... or int/bool tensors, got "
                f"{type(k).__name__}."
            )
    if n_ellipsis > 1:
        raise ShapeError(f"{_OP}: at most one ... (Ellipsis) is allowed in a key.")
    if used > len(shape):
        raise ShapeError(
            f"{_OP}: the key indexes {used} dims but the tensor has rank {len(shape)} "
            f"(shape {shape}). Remove indices or check the mask's rank."
        )
    fill = [slice(None)] * (len(shape) - used)
    if n_ellipsis:
        i = next(j for j, k in enumerate(entries) if k is Ellipsis)
        return entries[:i] + fill + entries[i + 1 :]
    return entries + fill


def index_with_tensors(t: Tensor, key: Any) -> Tensor:
    """``t[key]`` for a key holding int or bool tensors (or lists), differentiable.

    Args:
        t: The indexed tensor.
        key: A key as for PyTorch: ints, slices, ``None``, ``...``, int tensors (negative values
            count from the end) and bool tensors (their true positions, on as many dims as the
            mask has; the mask's shape must equal those dims).

    Returns:
        The selected values; the gradient scatter-adds back (repeats add up).

    Example:
        >>> x = em.tensor([[1.0, -2.0], [-3.0, 4.0]])
        >>> x[x > 0].tolist(), x[em.tensor([1, 0]), 0].tolist()
        ([1.0, 4.0], [-3.0, 1.0])
    """
    shape = t.shape
    key = key if isinstance(key, tuple) else (key,)
    strategy = _key_context(t, key)
    entries = _expand(shape, key)

    # 1. apply ints, slices and None; advanced entries keep their dims whole
    basic: list[Any] = []
    arrays: list[np.ndarray] = []  # one int array per advanced dim of y
    adv_pos: list[int] = []  # positions of those dims in y
    axis = 0  # next dim of t
    ydim = 0  # next dim of y
    for k in entries:
        if isinstance(k, int):
            basic.append(k)  # range-checked by the basic index below; its dim goes away
            axis += 1
            continue
        if k is None or isinstance(k, slice):
            basic.append(k)
            axis += k is not None
            ydim += 1
            continue
        if k.dtype.kind == "b":
            dims = shape[axis : axis + k.ndim]
            if k.shape != dims:
                raise ShapeError(
                    f"{_OP}: bool mask of shape {k.shape} does not match the indexed dims "
                    f"{dims} (dims {axis}..{axis + k.ndim - 1} of {shape}); expected equal shapes."
                )
            parts: tuple[np.ndarray, ...] = tuple(np.nonzero(k))
            sizes = dims
        else:
            parts, sizes = (k.astype(np.int64, copy=False),), shape[axis : axis + 1]
        for a, n in zip(parts, sizes):
            if a.size and (int(a.min()) < -n or int(a.max()) >= n):
                bad = int(a.min()) if int(a.min()) < -n else int(a.max())
                raise ShapeError(
                    f"{_OP}: index {bad} is out of range for dim {axis} of size {n}; expected "
                    f"indices in [{-n}, {n}). Negative indices count from the end."
                )
            arrays.append(np.where(a < 0, a + n, a))
            adv_pos.append(ydim)
            basic.append(slice(None))
            axis += 1
            ydim += 1
    y = t[tuple(basic)]

    # 2. broadcast the index arrays; bring the advanced dims to the front
    try:
        arrays = list(np.broadcast_arrays(*arrays))
    except ValueError:
        shapes = [a.shape for a in arrays]
        raise ShapeError(
            f"{_OP}: index tensors of shapes {shapes} do not broadcast together; expected "
            "shapes that broadcast (sizes equal or 1 from the right)."
        ) from None
    bshape = arrays[0].shape if arrays else ()
    rest_pos = [i for i in range(y.ndim) if i not in adv_pos]
    y = y.permute(adv_pos + rest_pos)
    lead = y.shape[: len(adv_pos)]
    rest = y.shape[len(adv_pos) :]

    # 3. one row-major index into the merged front dims, then select its rows
    flat = np.zeros(bshape, dtype=np.int64)
    for a, n in zip(arrays, lead):
        flat = flat * n + a
    rows = 1
    for n in lead:
        rows *= n
    idx = type(t).from_data(flat.reshape(-1), device=t._dev, dtype="int64")
    out = y.reshape((rows, *rest)).select(0, idx).reshape((*bshape, *rest))

    # adjacent advanced dims keep their place, separated ones go first
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    p = adv_pos[0] if adjacent else 0
    if p:
        nb = len(bshape)
        order = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, out.ndim))
        out = out.permute(order)
    if t._strategy is None and strategy is not None:
        # a plain tensor indexed by autodiff indices: an autodiff result, as for other ops
        out = out.autodiff().with_gradient_checkpointing_strategy(strategy)
    return out


def _key_context(t: Tensor, key: tuple[Any, ...]) -> Any:
    """Check the key's tensors as operands (same device, one strategy); the key's strategy."""
    from . import checks

    strategy = t._strategy
    for k in key:
        if not isinstance(k, AnyTensor):
            continue
        checks.same_device(_OP, t._dev, k._dev)
        s = k._strategy
        if s is None:
            continue
        if strategy is not None and s is not strategy:
            raise checks.same_strategy(_OP, strategy, s)
        strategy = s
    return strategy
