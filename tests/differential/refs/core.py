"""PyTorch references for the core rows (elementwise, reductions, layout, matmul, casts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

T = torch.Tensor
_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


def _unary(fn: Callable[[T], T]) -> Callable[..., T]:
    return lambda x: fn(x)


def _with_value(fn: Callable[[T, Any], T]) -> Callable[..., T]:
    return lambda x, value: fn(x, value)


def _clamp(x: T, min: float | None, max: float | None) -> T:
    return torch.clamp(x, min=min, max=max)


def _cast(x: T, dtype: Any, src: Any) -> T:
    return x.to(_DTYPES[dtype.name])


def _max_dim(x: T, dim: int) -> T:
    return torch.max(x, dim, keepdim=True).values


def _min_dim(x: T, dim: int) -> T:
    return torch.min(x, dim, keepdim=True).values


def _to_device(x: T, src: Any, dst: Any) -> T:
    return x.clone()  # same device in the suites: the identity, differentiable


REFS: dict[str, Callable[..., Any]] = {
    # binary
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "powf": torch.pow,
    # with a Python scalar
    "add_scalar": _with_value(lambda x, v: x + v),
    "sub_scalar": _with_value(lambda x, v: x - v),
    "rsub_scalar": _with_value(lambda x, v: v - x),
    "mul_scalar": _with_value(lambda x, v: x * v),
    "div_scalar": _with_value(lambda x, v: x / v),
    "rdiv_scalar": _with_value(lambda x, v: v / x),
    "powf_scalar": _with_value(lambda x, v: x**v),
    "powi_scalar": _with_value(lambda x, v: x**v),
    "clamp": _clamp,
    # unary math
    "neg": _unary(torch.neg),
    "exp": _unary(torch.exp),
    "log": _unary(torch.log),
    "log1p": _unary(torch.log1p),
    "sqrt": _unary(torch.sqrt),
    "sin": _unary(torch.sin),
    "cos": _unary(torch.cos),
    "tanh": _unary(torch.tanh),
    "erf": _unary(torch.erf),
    "abs": _unary(torch.abs),
    "recip": _unary(torch.reciprocal),
    "sign": _unary(torch.sign),
    # masks and casts
    "mask_where": lambda x, mask, values: torch.where(mask, values, x),
    "mask_fill": lambda x, mask, value: x.masked_fill(mask, value),
    "cast": _cast,
    # comparisons and logic
    "equal": torch.eq,
    "not_equal": torch.ne,
    "greater": torch.gt,
    "greater_equal": torch.ge,
    "lower": torch.lt,
    "lower_equal": torch.le,
    "equal_elem": _with_value(torch.eq),
    "not_equal_elem": _with_value(torch.ne),
    "greater_elem": _with_value(torch.gt),
    "greater_equal_elem": _with_value(torch.ge),
    "lower_elem": _with_value(torch.lt),
    "lower_equal_elem": _with_value(torch.le),
    "logical_not": torch.logical_not,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    # reductions
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x, dim: x.sum(dim, keepdim=True),
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x, dim: x.mean(dim, keepdim=True),
    "max_dim": _max_dim,
    "min_dim": _min_dim,
    "argmax": lambda x, dim: x.argmax(dim, keepdim=True),
    "argmin": lambda x, dim: x.argmin(dim, keepdim=True),
    # linalg and layout
    "matmul": torch.matmul,
    "linear": torch.nn.functional.linear,
    "reshape": lambda x, shape: x.reshape(shape),
    "permute": lambda x, dims: x.permute(dims),
    "expand": lambda x, shape: x.expand(shape),
    "index": lambda x, key: x[key],
    "cat": lambda *xs, dim: torch.cat(xs, dim),
    "stack": lambda *xs, dim: torch.stack(xs, dim),
    "to_device": _to_device,
}
