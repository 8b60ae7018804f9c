"""Functional gradients: ``grad``, ``vjp`` and ``hvp`` (API.md, "Higher-order gradients").

All three run the recorded backward pass of ``ember.autodiff.higher``: with ``create_graph=True``
the results are tracked tensors that can be differentiated again; without, they are plain tensors.
Unlike ``backward()``, ``grad`` returns gradients of any tracked tensors the caller names (leaves
or intermediates), one per input, ``None`` where an input is not reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DeviceError, DTypeError, ShapeError
from .requirement import Requirement

if TYPE_CHECKING:
    from .._core.tensor import Tensor

TensorOrSeq = Any  # a Tensor, or a sequence of them
_GRAD = Requirement.GRAD


def _tensors(op: str, what: str, value: TensorOrSeq) -> list[Tensor]:
    from .._core.tensor import Tensor

    items = [value] if isinstance(value, Tensor) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise DTypeError(
            f"{op}: expected {what} to be an em.Tensor or a non-empty list/tuple of them, got "
            f"{type(value).__name__}."
        )
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise DTypeError(
                f"{op}: expected {what}[{i}] to be an em.Tensor, got {type(t).__name__}."
            )
    return list(items)


def _seeds(op: str, outs: list[Tensor], grad_outputs: TensorOrSeq | None) -> list[Tensor]:
    from .._core.dispatch import wrap
    from .._core.tensor import Tensor

    if grad_outputs is None:
        gos: list[Tensor | None] = [None] * len(outs)
    else:
        items = [grad_outputs] if isinstance(grad_outputs, Tensor) else grad_outputs
        if not isinstance(items, (list, tuple)):
            raise DTypeError(
                f"{op}: expected grad_outputs to be an em.Tensor, a list/tuple of them (None "
                f"entries mean ones) or None, got {type(grad_outputs).__name__}."
            )
        gos = list(items)
        for i, g in enumerate(gos):
            if g is not None and not isinstance(g, Tensor):
                raise DTypeError(
                    f"{op}: expected grad_outputs[{i}] to be an em.Tensor or None, got "
                    f"{type(g).__name__}."
                )
        if len(gos) != len(outs):
            raise ShapeError(
                f"{op}: expected one grad_output per output ({len(outs)}), got {len(gos)}."
            )
    seeds = []
    for i, (o, g) in enumerate(zip(outs, gos)):
        if g is None:
            seeds.append(wrap(type(o), o._dev.b.ones_like(o._data), o._dev, o._strategy))
            continue
        if g.shape != o.shape:
            raise ShapeError(
                f"{op}: expected grad_outputs[{i}] of the output's shape {o.shape}, got {g.shape}."
            )
        if g._dev is not o._dev:
            raise DeviceError(
                f"{op}: grad_outputs[{i}] is on {g._dev}, its output on {o._dev}. Move it with "
                ".to_device(output.device)."
            )
        if g.dtype is not o.dtype:
            g = g.cast(o.dtype)
        seeds.append(g)
    return seeds


def _grad(
    op: str,
    outputs: TensorOrSeq,
    inputs: TensorOrSeq,
    grad_outputs: TensorOrSeq | None,
    create_graph: bool,
    consume: bool,
) -> tuple[Tensor | None, ...]:
    from .higher import graph_pass, untracked_error

    outs = _tensors(op, "outputs", outputs)
    ins = _tensors(op, "inputs", inputs)
    for o in outs:
        if o._node is None:
            raise untracked_error(op, o)
        if o._dev is not outs[0]._dev:
            raise DeviceError(
                f"{op}: expected every output on one device, got {outs[0]._dev} and {o._dev}. "
                "Move them with .to_device(...) first."
            )
    seeds = _seeds(op, outs, grad_outputs)
    wanted = {x._node for x in ins if x._node is not None}
    if consume and not create_graph and len(outs) == 1:
        if all(n.requirement is _GRAD for n in wanted):  # leaves only: the first-order engine
            return _first_order(outs[0], seeds[0], ins)
    strategy = outs[0]._strategy if create_graph else None
    roots = [o._node for o in outs]
    found = graph_pass(roots, seeds, outs[0]._dev, strategy, wanted, consume=consume)  # type: ignore[arg-type]
    return tuple(None if x._node is None else found.get(x._node) for x in ins)


def _first_order(out: Tensor, seed: Tensor, ins: list[Tensor]) -> tuple[Tensor | None, ...]:
    """``grad`` of one output by require-grad leaves, no graph recorded: ``run_backward``."""
    from .._core.dispatch import wrap
    from .engine import run_backward

    assert out._node is not None
    found = run_backward(out._node, seed._data)
    result: list[Tensor | None] = []
    for x in ins:
        g = None if x._node is None else found.get(x._node.id)
        result.append(None if g is None else wrap(type(x), g, x._dev))
    return tuple(result)


def grad(
    outputs: TensorOrSeq,
    inputs: TensorOrSeq,
    grad_outputs: TensorOrSeq | None = None,
    create_graph: bool = False,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, as ``torch.autograd.grad``.

    Args:
        outputs: A tracked tensor or a sequence of them; a non-scalar is seeded with ones
            unless its ``grad_outputs`` entry is given.
        inputs: Tracked tensors (require-grad leaves or intermediates) to differentiate by.
        grad_outputs: The gradients to start from, one per output (same shapes); tracked ones
            are differentiated through as well.
        create_graph: Record the backward: the results are tracked tensors with their own
            ``backward()``, and the graph run through is left unconsumed. Without it the results
            are plain tensors and the graph is consumed, as by ``backward()``.

    Returns:
        One tensor per input (of the input's shape and dtype), ``None`` where the outputs do not
        depend on it.

    Raises:
        AutodiffError: An output is untracked, its graph was consumed, or (with
            ``create_graph``) a row on the path has no differentiable backward.

    Example:
        >>> x = Tensor.from_data([1.0, 2.0], device=Device.cpu().autodiff()).require_grad()
        >>> (g,) = ember.autodiff.grad((x * x * x).sum(), x, create_graph=True)
        >>> g.tolist(), ember.autodiff.grad(g.sum(), x)[0].tolist()
        ([3.0, 12.0], [6.0, 12.0])
    """
    if not isinstance(create_graph, bool):
        raise DTypeError(f"grad: expected create_graph to be a bool, got {create_graph!r}.")
    return _grad("grad", outputs, inputs, grad_outputs, create_graph, consume=not create_graph)


def _lift(op: str, x: Tensor) -> Tensor:
    """``x`` as a tensor gradients flow to: tracked as is, else a fresh require-grad leaf."""
    if x._node is not None:
        return x
    if not x.dtype.is_float:
        raise DTypeError(
            f"{op}: expected float tensors to differentiate by, got {x.dtype.name}. Convert "
            "with .float() first."
        )
    return x.autodiff().require_grad()


def vjp(f: Callable[..., Tensor], *xs: Tensor) -> tuple[Tensor, Callable[..., tuple[Any, ...]]]:
    """``f(*xs)`` and its vector-Jacobian product function (the pullback), as ``jax.vjp``.

    Untracked ``xs`` become fresh require-grad leaves (tracked ones are used as they are, so
    gradients also reach what they came from). ``pullback(v, create_graph=False)`` returns the
    gradients of ``(out * v).sum()`` with respect to each ``x`` (``v`` defaults to ones) and may
    be called any number of times: it never consumes the graph.

    Example:
        >>> out, pullback = ember.autodiff.vjp(lambda a: a * a, Tensor.from_data([3.0]))
        >>> pullback(Tensor.from_data([1.0]))[0].tolist()
        [6.0]
    """
    if not callable(f):
        raise DTypeError(f"vjp: expected a callable f, got {type(f).__name__}.")
    leaves = [_lift("vjp", x) for x in _tensors("vjp", "xs", list(xs))]
    out = f(*leaves)
    _tensors("vjp", "f's result", out)

    def pullback(v: TensorOrSeq | None = None, *, create_graph: bool = False) -> tuple[Any, ...]:
        got = _grad("vjp", out, leaves, v, create_graph, consume=False)
        return tuple(_zeros_if_none(g, x) for g, x in zip(got, leaves))

    return out, pullback


def hvp(
    f: Callable[..., Tensor],
    x: Tensor | Sequence[Tensor],
    v: Tensor | Sequence[Tensor],
    *,
    create_graph: bool = False,
) -> tuple[Tensor, Any]:
    """``f(x)`` and the Hessian-vector product ``H v`` of the scalar ``f`` at ``x``.

    As ``torch.autograd.functional.hvp``: ``x`` and ``v`` are a tensor or matching sequences of
    tensors (``f`` is then called as ``f(*x)``), and ``H v`` has ``x``'s structure. It is the
    gradient of ``(grad f(x) * v).sum()``, a backward through a recorded backward.

    Returns:
        ``(f(x), H v)``: plain tensors, or tracked ones with ``create_graph=True``.

    Example:
        >>> x = Tensor.from_data([1.0, 2.0])
        >>> value, hv = ember.autodiff.hvp(lambda a: (a * a * a).sum(), x, Tensor.ones((2,)))
        >>> value.item(), hv.tolist()
        (9.0, [6.0, 12.0])
    """
    from .._core.tensor import Tensor

    if not callable(f):
        raise DTypeError(f"hvp: expected a callable f, got {type(f).__name__}.")
    single = isinstance(x, Tensor)
    xs = _tensors("hvp", "x", x)
    vs = _tensors("hvp", "v", v)
    if len(vs) != len(xs):
        raise ShapeError(f"hvp: expected one v per x ({len(xs)}), got {len(vs)}.")
    for i, (a, b) in enumerate(zip(xs, vs)):
        if a.shape != b.shape:
            raise ShapeError(f"hvp: expected v[{i}] of x[{i}]'s shape {a.shape}, got {b.shape}.")
    leaves = [_lift("hvp", a) for a in xs]
    y = f(*leaves)
    _tensors("hvp", "f's result", y)
    if y.numel() != 1:
        raise ShapeError(
            f"hvp: expected f to return a scalar, got shape {y.shape}. Reduce it (.sum()) first."
        )
    gs = _grad("hvp", y, leaves, None, True, consume=False)
    dot = None
    for g, b in zip(gs, vs):
        if g is not None:
            term = (g * b).sum()
            dot = term if dot is None else dot + term
    if dot is None or dot._node is None:
        hv: list[Any] = [None] * len(leaves)  # f is (at most) linear in x: H = 0
    else:
        hv = list(_grad("hvp", dot, leaves, None, create_graph, consume=not create_graph))
    out = [_zeros_if_none(h, a) for h, a in zip(hv, leaves)]
    if not create_graph:
        y = y.without_autodiff()
        out = [o.without_autodiff() for o in out]
    return y, (out[0] if single else tuple(out))


def _zeros_if_none(g: Tensor | None, like: Tensor) -> Tensor:
    if g is not None:
        return g
    from .._core.dispatch import wrap

    return wrap(type(like), like._dev.b.zeros_like(like._data), like._dev)


__all__ = ["grad", "hvp", "vjp"]
