"""``einsum``: Einstein summation built from existing rows (mul, sum, permute, reshape, matmul).

The equation is PyTorch's: comma-separated operand labels, an optional ``->`` output, ``...`` for
broadcast dims. Without ``->`` the output is the ellipsis dims followed by the labels that occur
once, in alphabetical order. A label repeated within one operand takes its diagonal; a label of
size 1 broadcasts against the same label's size elsewhere. Operands are contracted left to
right, each pair with one batched ``matmul``; a label is summed out as soon as no later operand
and not the output needs it. Every step is a differentiable row, so gradients come for free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DTypeError, ShapeError
from .base import AnyTensor

if TYPE_CHECKING:
    from .tensor import Tensor

_OP = "einsum"
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _hint(equation: str, detail: str) -> ShapeError:
    return ShapeError(
        f"{_OP}: {detail} in {equation!r}. Expected labels a-z/A-Z per operand dim, operands "
        "separated by ',', an optional '->output' and '...' for broadcast dims, e.g. "
        "'bij,bjk->bik'."
    )


def _terms(equation: str, ops: Sequence[Tensor]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output's, with ``...`` expanded to private labels (the
    characters chr(0x100 + i), aligned from the right as broadcasting aligns dims)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(ops):
        raise _hint(equation, f"{len(inputs)} operand terms for {len(ops)} operands")
    n_ell = 0
    terms: list[list[str]] = []
    for term, t in zip(inputs, ops):
        named = term.replace("...", "")
        if term.count("...") > 1 or "." in named or not set(named) <= _LETTERS:
            raise _hint(equation, f"a malformed term {term!r}")
        k = t.ndim - len(named)
        if k < 0 or (k > 0 and "..." not in term):
            raise _hint(equation, f"term {term!r} has {len(named)} labels for a {t.ndim}-d operand")
        n_ell = max(n_ell, k)
        ell = [chr(0x100 + j) for j in range(k)]
        head, _, tail = term.partition("...")
        terms.append([*head, *ell, *tail] if "..." in term else list(named))
    # right-align the ellipsis labels: an operand with fewer ellipsis dims gets the last ones
    all_ell = [chr(0x100 + i) for i in range(n_ell)]
    for i, labels in enumerate(terms):
        k = sum(1 for c in labels if ord(c) >= 0x100)
        shift = {chr(0x100 + j): all_ell[n_ell - k + j] for j in range(k)}
        terms[i] = [shift.get(c, c) for c in labels]
    if arrow:
        named = rhs.replace("...", "")
        if rhs.count("...") > 1 or "." in named or not set(named) <= _LETTERS:
            raise _hint(equation, f"a malformed output {rhs!r}")
        head, _, tail = rhs.partition("...")
        out = [*head, *all_ell, *tail] if "..." in rhs else list(named)
        if n_ell and "..." not in rhs:
            raise _hint(equation, "an output without '...' while operands have broadcast dims")
    else:
        counts: dict[str, int] = {}
        for labels in terms:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        out = [*all_ell, *sorted(c for c, n in counts.items() if n == 1 and ord(c) < 0x100)]
    if len(set(out)) != len(out):
        raise _hint(equation, "an output label that repeats")
    seen = {c for term in terms for c in term}
    missing = [c for c in out if c not in seen]
    if missing:
        raise _hint(equation, f"output label {missing[0]!r} that no operand has")
    return terms, out


def _diagonal(t: Tensor, labels: list[str]) -> tuple[Tensor, list[str]]:
    """Take the diagonal over every label repeated within one operand."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        n, m = t.shape[i], t.shape[j]
        if n != m:
            raise ShapeError(
                f"{_OP}: label {c!r} repeats within one operand over dims of sizes {n} and {m}; "
                "a diagonal needs equal sizes."
            )
        ar = type(t).arange(0, n, device=t._dev)
        eye = ar.reshape((n, 1)) == ar.reshape((1, n))
        shape = [1] * t.ndim
        shape[i], shape[j] = n, n
        t = (t * eye.reshape(tuple(shape)).cast(t.dtype)).sum_dim(j).squeeze_dim(j)
        labels = labels[:j] + labels[j + 1 :]
    return t, labels


def _sum_out(t: Tensor, labels: list[str], keep: set[str]) -> tuple[Tensor, list[str]]:
    for i in reversed(range(len(labels))):
        if labels[i] not in keep:
            t = t.sum_dim(i).squeeze_dim(i)
            labels = labels[:i] + labels[i + 1 :]
    return t, labels


def _sizes(a: Tensor, la: list[str], b: Tensor, lb: list[str]) -> dict[str, int]:
    size: dict[str, int] = {}
    for t, labels in ((a, la), (b, lb)):
        for c, n in zip(labels, t.shape):
            m = size.get(c, n)
            if m != n and 1 not in (m, n):
                name = "a broadcast dim" if ord(c) >= 0x100 else f"label {c!r}"
                raise ShapeError(
                    f"{_OP}: {name} has sizes {m} and {n} in two operands; sizes must match "
                    "(or be 1 to broadcast)."
                )
            size[c] = max(m, n)
    return size


def _arrange(t: Tensor, labels: list[str], order: list[str], size: dict[str, int]) -> Tensor:
    """``t`` with its dims in ``order`` (labels it lacks inserted as size 1), size-1 dims of a
    label another operand holds larger expanded to that size."""
    for c in order:
        if c not in labels:
            t = t.unsqueeze_dim(t.ndim)
            labels = [*labels, c]
    t = t.permute([labels.index(c) for c in order])
    want = tuple(size[c] for c in order)
    return t.expand(want) if t.shape != want else t


def _contract(
    a: Tensor, la: list[str], b: Tensor, lb: list[str], keep: set[str]
) -> tuple[Tensor, list[str]]:
    """One pair: batch labels (both, kept), a-only and b-only kept, contracted (both, not kept)."""
    size = _sizes(a, la, b, lb)
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    a_only = [c for c in la if c not in lb]
    b_only = [c for c in lb if c not in la]
    x = _arrange(a, la, [*batch, *a_only, *summed], size)
    y = _arrange(b, lb, [*batch, *summed, *b_only], size)
    nb = [size[c] for c in batch]
    m = math.prod(size[c] for c in a_only)
    k = math.prod(size[c] for c in summed)
    n = math.prod(size[c] for c in b_only)
    out = x.reshape((*nb, m, k)).matmul(y.reshape((*nb, k, n)))
    labels = [*batch, *a_only, *b_only]
    return out.reshape(tuple(size[c] for c in labels)), labels


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation, as ``torch.einsum``: ``einsum("bij,bjk->bik", a, b)``.

    The operands may also come as one list (``einsum(eq, [a, b])``).
    """
    if not isinstance(equation, str):
        raise DTypeError(
            f"{_OP}: expected the equation string first, got {type(equation).__name__}; call "
            "Tensor.einsum('ij,jk->ik', a, b)."
        )
    ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], list) else operands
    if not ops or not all(isinstance(t, AnyTensor) for t in ops):
        got = [type(t).__name__ for t in ops]
        raise DTypeError(f"{_OP}: expected one or more em.Tensor operands, got {got}.")
    terms, out = _terms(equation, ops)
    pairs = [_diagonal(t, labels) for t, labels in zip(ops, terms)]
    # what must survive operand i's step: the output's labels and every later operand's
    needed_later = [
        set(out).union(*(set(lb) for _, lb in pairs[i + 1 :])) for i in range(len(pairs))
    ]
    t, labels = _sum_out(*pairs[0], needed_later[0])
    for i in range(1, len(pairs)):
        b, lb = pairs[i]
        b, lb = _sum_out(b, lb, needed_later[i] | set(labels))
        t, labels = _contract(t, labels, b, lb, needed_later[i])
    t, labels = _sum_out(t, labels, set(out))
    return t.permute([labels.index(c) for c in out]) if labels != out else t
