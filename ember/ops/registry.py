"""The op registry: one ``OpSpec`` row per primitive, in the dict ``OPS``.

A row holds everything about a primitive: its forward (by default the backend method of the same
name), its backward rule, its cost class (read by gradient checkpointing), what its backward needs
saved, and the input domain and examples the registry-driven test suites sample from.

Backward rules receive ``ctx`` (the graph node: ``ctx.inputs``, ``ctx.output``, ``ctx.saved``,
``ctx.attrs``, ``ctx.shapes``, ``ctx.parents``, the backend ``ctx.b``) and the incoming gradient
as raw backend arrays, and return one gradient per input (``None`` where an input gets none). The
engine sums broadcast gradients back to each input's shape.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backend.base import install_rows

Array = Any
Grads = tuple[Array | None, ...]
Rule = Callable[[Any, Array], Grads]
Example = tuple[tuple[Any, ...], dict[str, Any]]
Examples = list[Example]  # what a row's ``examples(rng)`` returns


class Cost(enum.Enum):
    """How expensive an op's output is to recompute (SEMANTICS.md §7)."""

    MEMORY_BOUND = "memory-bound"
    COMPUTE_BOUND = "compute-bound"


class Saves(enum.Flag):
    """What a backward rule reads: the op's inputs, its output, its residuals, or nothing.

    ``RESIDUALS``: the forward returns ``(out, saved)``, ``saved`` being values its backward reads
    besides inputs and output (a raw array or a tuple of them, e.g. a row's logsumexp). The node
    keeps ``saved`` as ``ctx.saved`` (counted by ``checkpoint.report``, released after the step,
    kept under every strategy); callers of the row see ``out`` only.
    """

    NONE = 0
    INPUTS = enum.auto()
    OUTPUT = enum.auto()
    RESIDUALS = enum.auto()
    BOTH = INPUTS | OUTPUT


class Precision(enum.Enum):
    """What ``ember.amp.autocast`` does with an op's float operands (``OpSpec.precision``).

    ``KEEP`` (the default): the op runs in its operands' own dtypes. ``LOW``: float operands are
    cast to the policy's low-precision dtype (matmul, linear, convolutions, attention); 0-d
    operands, a row's "none" placeholders, are left alone. ``FULL``: float16/bfloat16 operands
    are cast up to float32 (softmax, normalisation, losses that need the range). ``FOLLOW``
    (elementwise arithmetic): a float32 operand smaller than a low-precision one, a bias, is cast
    to the low dtype, as a fused ``addmm`` bias would be; it only acts on operands of different
    float dtypes. Outside autocast every class runs in the operands' dtypes.
    """

    KEEP = "keep"
    LOW = "low"
    FULL = "full"
    FOLLOW = "follow"


class Domain(enum.Enum):
    """Which input dtypes an op accepts."""

    ANY = "any"
    NUMERIC = "numeric"  # int or float, not bool
    FLOAT = "float"


@dataclass(eq=False)
class OpSpec:
    """One primitive. ``arity`` is -1 for list-input ops (cat, stack).

    ``fused_backward`` names a kernel of ``ember/backend/families/fused.py`` that a backend may
    supply in place of the row's rule (cuDNN attention, ATen's layer-norm backward). ``rule`` is
    the row's own backward, backend-agnostic; ``backward``, what the engine calls, is that rule,
    or for such a row the backend's kernel where its class supplies one and takes the inputs.
    """

    name: str
    arity: int
    backward: Rule | None
    cost: Cost
    saves: Saves
    forward: Callable[..., Array] | None = None
    domain: tuple[float, float] | None = None
    dtypes: Domain = Domain.ANY
    examples: Callable[[Any], Sequence[Example]] | None = None
    smooth: bool = True  # False where finite differences don't apply (kinks are avoided by domain)
    precision: Precision = Precision.KEEP  # what amp does with the float operands
    fused_backward: str | None = None  # a backend kernel that may replace the rule (see below)
    # the row's recompute cost estimate, ``flops(input_shapes, attrs) -> float`` (multiply-adds
    # and passes); ``None``: its class's default per output element (``ember.checkpoint.cost``)
    flops: Callable[[tuple[tuple[int, ...], ...], dict[str, Any]], float] | None = None
    # the kernel draws random numbers (attention's fused dropout): no strategy recomputes its
    # output, since a recompute would draw again
    random: bool = False
    rule: Rule | None = field(init=False)  # the row's own rule, written once for every backend
    saves_inputs: bool = field(init=False)
    saves_output: bool = field(init=False)
    saves_residuals: bool = field(init=False)  # the forward returns (out, saved)
    memory_bound: bool = field(init=False)
    autocasts: bool = field(init=False)  # precision is LOW or FULL: amp may cast any operand

    def __post_init__(self) -> None:
        # plain booleans: the dispatch hot path reads them on every op
        self.saves_inputs = bool(self.saves & Saves.INPUTS)
        self.saves_output = bool(self.saves & Saves.OUTPUT)
        self.saves_residuals = bool(self.saves & Saves.RESIDUALS)
        self.memory_bound = self.cost is Cost.MEMORY_BOUND
        self.autocasts = self.precision is Precision.LOW or self.precision is Precision.FULL
        self.rule = self.backward
        if self.fused_backward is not None and self.backward is not None:
            self.backward = _fused_first(self.backward, self.fused_backward, self.saves)

    @property
    def differentiable(self) -> bool:
        return self.backward is not None

    def __repr__(self) -> str:
        return f"OpSpec({self.name!r}, {self.cost.value})"


OPS: dict[str, OpSpec] = {}


def _fused_first(rule: Rule, kernel: str, saves: Saves) -> Rule:
    """``rule`` behind the fused backward ``kernel`` of the backends whose class supplies it.

    The kernel gets ``(grad, *inputs, output, **attrs)`` (what the row saves); its gradients for
    inputs that get none are dropped. ``NotImplemented`` from it means "not these inputs": the
    rule runs.
    """
    inputs, output = bool(saves & Saves.INPUTS), bool(saves & Saves.OUTPUT)

    @functools.wraps(rule)
    def backward(ctx: Any, grad: Array) -> Grads:
        fused = ctx.b.fused_backwards.get(kernel)
        if fused is not None:
            if inputs:
                saved = (*ctx.inputs, ctx.output) if output else ctx.inputs
            else:
                saved = (ctx.output,)
            grads = fused(grad, *saved, **ctx.attrs)
            if grads is not NotImplemented:
                if type(grads) is not tuple:
                    return (grads,)
                parents = ctx.parents
                return tuple(g if parents[i] is not None else None for i, g in enumerate(grads))
        return rule(ctx, grad)

    return backward


def _need(ctx: Any, i: int) -> bool:
    """Whether input ``i`` of the node ``ctx`` gets a gradient (rules skip the work otherwise)."""
    return ctx.parents[i] is not None


def defop(
    name: str,
    *,
    arity: int,
    cost: Cost,
    saves: Saves = Saves.NONE,
    forward: Callable[..., Array] | None = None,
    domain: tuple[float, float] | None = None,
    dtypes: Domain = Domain.ANY,
    examples: Callable[[Any], Sequence[Example]] | None = None,
    smooth: bool = True,
    precision: Precision = Precision.KEEP,
    fused_backward: str | None = None,
    flops: Callable[[tuple[tuple[int, ...], ...], dict[str, Any]], float] | None = None,
    random: bool = False,
) -> Callable[[Rule], Rule]:
    """Decorate a backward rule to register the op ``name``."""

    def wrap(rule: Rule) -> Rule:
        register(
            OpSpec(
                name,
                arity,
                rule,
                cost,
                saves,
                forward,
                domain,
                dtypes,
                examples,
                smooth,
                precision,
                fused_backward,
                flops,
                random,
            )
        )
        return rule

    return wrap


def register(spec: OpSpec) -> OpSpec:
    """Add a row (used directly for ops with no backward, such as comparisons)."""
    if spec.name in OPS:
        raise ValueError(f"defop: op {spec.name!r} is registered twice")
    OPS[spec.name] = spec
    return spec


def nondiff(
    name: str,
    arity: int,
    *,
    forward: Callable[..., Array] | None = None,
    dtypes: Domain = Domain.ANY,
    examples: Callable[[Any], Sequence[Example]] | None = None,
) -> OpSpec:
    """Register an op without gradient (comparisons, argmax...). Its results never carry a node."""
    return register(
        OpSpec(name, arity, None, Cost.MEMORY_BOUND, Saves.NONE, forward, None, dtypes, examples)
    )


# ---------------------------------------------------------------- recompute cost estimates
Shapes = tuple[tuple[int, ...], ...]


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def matmul_flops(shapes: Shapes, attrs: dict[str, Any]) -> float:
    """Multiply-adds of ``x @ y``: batch x M x K x N (1-D operands count as one row/column)."""
    x, y = shapes
    k = x[-1] if x else 1
    n = y[-1] if len(y) > 1 else 1
    extra = max(1, _prod(y[:-2]) // max(1, _prod(x[:-2])))  # batch dims only y has
    return float(_prod(x[:-1]) * k * n * extra)


def linear_flops(shapes: Shapes, attrs: dict[str, Any]) -> float:
    """Multiply-adds of ``x (*, K) @ w (N, K)^T``."""
    x, w = shapes[0], shapes[1]
    return float(_prod(x) * w[0])


def conv_flops(shapes: Shapes, attrs: dict[str, Any]) -> float:
    """Multiply-adds of a 2-D (transposed) convolution, about input size x kernel fan-out."""
    x, w = shapes[0], shapes[1]
    stride = attrs.get("stride", (1, 1))
    return float(_prod(x) * _prod(w[1:]) * w[0] / max(1, _prod(stride)) / max(1, x[1]))


def attention_flops(shapes: Shapes, attrs: dict[str, Any]) -> float:
    """Multiply-adds of ``softmax(q k^T) v``: two products over (L, S)."""
    q, k, v = shapes[0], shapes[1], shapes[2]
    return float(_prod(q[:-1]) * k[-2] * (q[-1] + v[-1]))


# Each backend owns a kernel table (``ember.backend.base.KernelTable``) that reads its rows here.
install_rows(OPS)


def run_forward(b: Any, spec: OpSpec, raws: Sequence[Array], attrs: dict[str, Any]) -> Array:
    """Compute ``spec``'s output on backend ``b`` (list-input ops take the list as one arg); a
    row with ``Saves.RESIDUALS`` gives its output only (``saved`` is what its node keeps)."""
    fn = b.table[spec.name]
    if spec.arity == -1:
        out = fn(list(raws), **attrs)
    else:
        out = fn(*raws, **attrs)
    return out[0] if spec.saves_residuals else out
