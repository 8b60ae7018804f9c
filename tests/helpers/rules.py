"""Run a row's backward on raw backend arrays: its own rule, or a backend's fused kernel."""

from __future__ import annotations

from typing import Any

from ember.ops.registry import OPS

Grads = tuple[Any, ...]


class _Ctx:
    """What a rule reads from its node; every input gets a gradient."""

    def __init__(self, b: Any, name: str, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> None:
        spec = OPS[name]
        self.b = b
        self.attrs = attrs
        self.inputs = inputs
        self.output = b.table[name](*inputs, **attrs)
        self.saved = None
        self.shapes = tuple(tuple(x.shape) for x in inputs)
        self.parents = tuple(object() for _ in inputs)
        self.saved_args = (*inputs, self.output) if spec.saves_output else inputs
        if not spec.saves_inputs:
            self.saved_args = (self.output,)


def _shaped(b: Any, grads: Any, ctx: _Ctx) -> Grads:
    if type(grads) is not tuple:
        grads = (grads,)
    return tuple(None if g is None else b.sum_to_shape(g, s) for g, s in zip(grads, ctx.shapes))


def rule_grads(
    b: Any, name: str, inputs: tuple[Any, ...], attrs: dict[str, Any], grad: Any
) -> Grads:
    """The gradients the row's own (backend-agnostic) rule gives on ``b``, in the inputs' shapes."""
    ctx = _Ctx(b, name, inputs, attrs)
    rule = OPS[name].rule
    assert rule is not None
    return _shaped(b, rule(ctx, grad), ctx)


def kernel_grads(
    b: Any, name: str, inputs: tuple[Any, ...], attrs: dict[str, Any], grad: Any
) -> Grads | None:
    """The gradients ``b``'s fused kernel for the row gives (inputs' shapes), or None where
    the backend supplies none or the kernel declines these inputs."""
    kernel_name = OPS[name].fused_backward
    fn = b.fused_backwards.get(kernel_name) if kernel_name else None
    if fn is None:
        return None
    ctx = _Ctx(b, name, inputs, attrs)
    out = fn(grad, *ctx.saved_args, **attrs)
    if out is NotImplemented:
        return None
    return _shaped(b, out, ctx)
