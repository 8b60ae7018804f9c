"""Hostile-argument fuzzing of ember's public creation, scalar, layout and nn.functional calls.

Every call gets arguments drawn (seeded) from a pool of out-of-range, non-finite and wrongly
typed values, on the NumPy and the torch backend. A finding is a call that raises anything but
an ``EmberError``, emits a warning, or silently stores a number its dtype cannot hold.

Usage: ``python scripts/fuzz_bad_args.py [--iterations N] [--seed S]``; exits 1 on findings.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

import ember as em
from ember.nn import functional as F

T = em.Tensor
NAN, INF = float("nan"), float("inf")
# hostile values: out of every int range, non-finite, fractional, wrongly typed
POOL: list[Any] = [
    2**31,
    -(2**31) - 1,
    2**63,
    -(2**63) - 1,
    2**64,
    2**100,
    -(2**100),
    10**400,
    1e20,
    -1e20,
    1e300,
    NAN,
    INF,
    -INF,
    2.5,
    -1.5,
    -1,
    0,
    1,
    3,
    True,
    None,
    "a",
    "2",
    [],
    (2,),
    [2, 3],
    (2.0, 3),
    (-1,),
    np.int64(2),
    np.float32(NAN),
    np.uint64(2**64 - 1),
    np.float64(2.0),
    1 + 2j,
    object(),
    b"x",
    {1: 2},
]
INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
DTYPES = [em.int32, em.int64, em.float32, em.float16, em.bool, None, "int64", "x", 3]


# NumPy's floating-point warnings of the computation itself (1 / 0, 10 ** 1e300): the values'
# IEEE semantics, not argument handling (casts of arguments are still reported)
_ARITHMETIC = re.compile(r"encountered in (divide|power|multiply|sqrt|true_divide|add|subtract)")


def _fits(v: Any, dtype: Any) -> bool:
    """Whether a Python number ``v`` is exactly representable in an int dtype."""
    name = getattr(dtype, "name", dtype)
    if name not in INT_RANGE or isinstance(v, bool):
        return True
    lo, hi = INT_RANGE[name]
    if isinstance(v, (int, np.integer)):
        return lo <= int(v) <= hi
    if isinstance(v, (float, np.floating)):
        return math.isfinite(v) and lo <= v <= hi
    return True


def _calls(dev: em.Device, r: np.random.Generator) -> list[tuple[str, Callable[[], Any], Any]]:
    """(name, thunk, silent-check) triples; the check returns a message for a silent bad result."""

    def p() -> Any:
        return POOL[int(r.integers(len(POOL)))]

    def dt() -> Any:
        return DTYPES[int(r.integers(len(DTYPES)))]

    xi = T.from_data(np.arange(6).reshape(2, 3), device=dev, dtype=em.int32)
    xl = T.from_data(np.arange(6).reshape(2, 3), device=dev)
    xf = T.from_data(np.arange(6.0).reshape(2, 3), device=dev)
    xb = xl > 2
    img = T.from_data(np.ones((1, 2, 5, 5), np.float32), device=dev)
    w2 = T.from_data(np.ones((2, 2, 3, 3), np.float32), device=dev)
    seq = T.from_data(np.ones((1, 2, 5), np.float32), device=dev)
    w1 = T.from_data(np.ones((2, 2, 3), np.float32), device=dev)
    emb = T.from_data(np.ones((4, 2), np.float32), device=dev)
    x32 = xf.cast(em.float32)
    x16 = xf.cast(em.float16)
    ts = [xi, xl, xf, x32, x16, xb]
    out: list[tuple[str, Callable[[], Any], Any]] = []

    def add(name: str, f: Callable[[], Any], silent: Any = None) -> None:
        out.append((name, f, silent))

    def fill_check(v: Any, d: Any) -> Callable[[Any], str | None]:
        def check(res: Any) -> str | None:
            if isinstance(res, em.Tensor) and not _fits(v, res.dtype):
                return f"stored {v!r} as {res.dtype.name}: {res.to_numpy().ravel()[:2]}"
            return None

        return check

    v1, d = p(), dt()
    add(
        f"full((2,), {v1!r}, dtype={d!r})",
        lambda: T.full((2,), v1, device=dev, dtype=d),
        fill_check(v1, d),
    )
    v2, d2 = p(), dt()
    add(
        f"from_data([{v2!r}], dtype={d2!r})",
        lambda: T.from_data([v2], device=dev, dtype=d2),
        fill_check(v2, d2),
    )
    v3 = p()
    add(f"em.tensor({v3!r})", lambda: em.tensor(v3, device=dev), fill_check(v3, "int64"))
    s, d4 = p(), dt()
    for name in ("zeros", "ones", "empty"):
        add(
            f"{name}({s!r}, dtype={d4!r})",
            lambda name=name: getattr(T, name)(s, device=dev, dtype=d4),
            lambda res, s=s: (
                f"shape {s!r} gave {res.shape}"
                if isinstance(s, float)
                or (isinstance(s, tuple) and any(isinstance(i, float) for i in s))
                else None
            ),
        )
    s2 = (p(), 2)
    add(
        f"zeros({s2!r})",
        lambda: T.zeros(s2, device=dev),
        lambda res: f"gave {res.shape}" if isinstance(s2[0], float) else None,
    )
    a, b, c = p(), p(), p()
    add(f"arange({a!r}, {b!r}, {c!r})", lambda: T.arange(a, b, c, device=dev))
    add(f"arange({a!r})", lambda: T.arange(a, device=dev))
    dists = [
        lambda: em.Distribution.uniform(p(), p()),
        lambda: em.Distribution.normal(p(), p()),
        lambda: em.Distribution.bernoulli(p()),
    ]
    k = int(r.integers(3))
    add(f"Distribution#{k}", dists[k])
    s3 = p()
    add(f"random({s3!r})", lambda: T.random(s3, em.Distribution.uniform(), device=dev))
    add(f"random(dist={s3!r})", lambda: T.random((2,), s3, device=dev))
    sd = p()
    add(f"seed({sd!r})", lambda: em.seed(sd))
    add("huge zeros", lambda: T.zeros((2**40, 2**40), device=dev))
    add("huge empty", lambda: T.empty((2**62,), device=dev))
    add("huge full", lambda: T.full((2**21, 2**21), 1, device=dev))
    for t in ts:
        nm = t.dtype.name
        v = p()  # every closure below binds t and v as defaults: the loop rebinds them

        def scalar_check(res: Any, v: Any = v, t: Any = t) -> str | None:
            if isinstance(res, em.Tensor) and res.dtype == t.dtype and not _fits(v, t.dtype):
                return f"{v!r} on {t.dtype.name} kept {t.dtype.name}: {res.to_numpy().ravel()[:3]}"
            return None

        for op in ("add_scalar", "sub_scalar", "mul_scalar", "div_scalar"):
            add(f"{nm}.{op}({v!r})", lambda op=op, t=t, v=v: getattr(t, op)(v), scalar_check)
        for sym, f in (
            ("+", lambda t, v: t + v),
            ("r-", lambda t, v: v - t),
            ("*", lambda t, v: t * v),
            ("r/", lambda t, v: v / t),
            ("**", lambda t, v: t**v),
            ("r**", lambda t, v: v**t),
            ("<", lambda t, v: t < v),
            ("==", lambda t, v: t == v),
            (">=", lambda t, v: t >= v),
        ):
            add(
                f"{nm} {sym} {v!r}",
                lambda f=f, t=t, v=v: f(t, v),
                None if sym in ("<", "==", ">=") else scalar_check,
            )
        add(f"{nm}.powi_scalar({v!r})", lambda t=t, v=v: t.powi_scalar(v), scalar_check)
        add(f"{nm}.powf_scalar({v!r})", lambda t=t, v=v: t.powf_scalar(v))
        lo, hi = p(), p()
        add(
            f"{nm}.clamp({lo!r}, {hi!r})",
            lambda t=t, lo=lo, hi=hi: t.clamp(lo, hi),
            lambda res, t=t, lo=lo, hi=hi: scalar_check(res, lo, t) or scalar_check(res, hi, t),
        )
        add(
            f"{nm}.clamp_min({lo!r})",
            lambda t=t, lo=lo: t.clamp_min(lo),
            lambda res, t=t, lo=lo: scalar_check(res, lo, t),
        )
        add(f"{nm}.mask_fill({v!r})", lambda t=t, v=v: t.mask_fill(xb, v), scalar_check)
        add(f"full_like({nm}, {v!r})", lambda t=t, v=v: T.full_like(t, v), scalar_check)
        add(f"{nm}.cast({v!r})", lambda t=t, v=v: t.cast(v))
    x = xf
    q = p()
    layout: list[tuple[str, Callable[[], Any]]] = [
        (f"reshape({q!r})", lambda: x.reshape(q)),
        (f"reshape(({q!r}, -1))", lambda: x.reshape((q, -1))),
        (f"permute({q!r})", lambda: x.permute(q)),
        (f"permute(({q!r}, 0))", lambda: x.permute((q, 0))),
        (f"expand({q!r})", lambda: x.expand(q)),
        (f"expand(({q!r}, 3))", lambda: x.expand((q, 3))),
        (f"repeat_dim(0, {q!r})", lambda: x.repeat_dim(0, q)),
        (f"repeat_dim({q!r}, 2)", lambda: x.repeat_dim(q, 2)),
        (f"narrow(1, {q!r}, 1)", lambda: x.narrow(1, q, 1)),
        (f"narrow(1, 0, {q!r})", lambda: x.narrow(1, 0, q)),
        (f"narrow({q!r}, 0, 1)", lambda: x.narrow(q, 0, 1)),
        (f"chunk({q!r})", lambda: x.chunk(q)),
        (f"chunk(2, {q!r})", lambda: x.chunk(2, q)),
        (f"split({q!r})", lambda: x.split(q)),
        (f"split(1, {q!r})", lambda: x.split(1, q)),
        (f"slice({q!r})", lambda: x.slice(q)),
        (f"slice([({q!r}, 2)])", lambda: x.slice([(q, 2)])),
        (f"unsqueeze_dim({q!r})", lambda: x.unsqueeze_dim(q)),
        (f"squeeze_dim({q!r})", lambda: x.squeeze_dim(q)),
        (f"swap_dims({q!r}, 0)", lambda: x.swap_dims(q, 0)),
        (f"flatten({q!r})", lambda: x.flatten(q)),
        (f"flip({q!r})", lambda: x.flip(q)),
        (f"tril({q!r})", lambda: x.tril(q)),
        (f"sum_dim({q!r})", lambda: x.sum_dim(q)),
        (f"x[{q!r}]", lambda: x[q]),
        (f"one_hot({q!r})", lambda: xl.one_hot(q)),
        (f"F.one_hot? xl.one_hot(3) of {q!r}", lambda: T.full((2,), q, device=dev).one_hot(3)),
    ]
    for name, f in layout:
        add(name, f)
    q2 = p()
    nn: list[tuple[str, Callable[[], Any]]] = [
        (f"conv2d(stride={q2!r})", lambda: F.conv2d(img, w2, stride=q2)),
        (f"conv2d(padding={q2!r})", lambda: F.conv2d(img, w2, padding=q2)),
        (f"conv2d(dilation={q2!r})", lambda: F.conv2d(img, w2, dilation=q2)),
        (f"conv2d(groups={q2!r})", lambda: F.conv2d(img, w2, groups=q2)),
        (f"conv2d(stride=({q2!r}, 1))", lambda: F.conv2d(img, w2, stride=(q2, 1))),
        (f"conv1d(stride={q2!r})", lambda: F.conv1d(seq, w1, stride=q2)),
        (f"conv1d(padding={q2!r})", lambda: F.conv1d(seq, w1, padding=q2)),
        (f"conv1d(dilation={q2!r})", lambda: F.conv1d(seq, w1, dilation=q2)),
        (f"conv1d(groups={q2!r})", lambda: F.conv1d(seq, w1, groups=q2)),
        (f"max_pool2d({q2!r})", lambda: F.max_pool2d(img, q2)),
        (f"max_pool2d(2, stride={q2!r})", lambda: F.max_pool2d(img, 2, stride=q2)),
        (f"max_pool2d(2, padding={q2!r})", lambda: F.max_pool2d(img, 2, padding=q2)),
        (f"max_pool2d(2, dilation={q2!r})", lambda: F.max_pool2d(img, 2, dilation=q2)),
        (f"avg_pool2d({q2!r})", lambda: F.avg_pool2d(img, q2)),
        (f"avg_pool2d(2, stride={q2!r})", lambda: F.avg_pool2d(img, 2, stride=q2)),
        (f"avg_pool2d(2, padding={q2!r})", lambda: F.avg_pool2d(img, 2, padding=q2)),
        (f"adaptive_avg_pool2d({q2!r})", lambda: F.adaptive_avg_pool2d(img, q2)),
        (f"dropout(p={q2!r})", lambda: F.dropout(xf, p=q2)),
        (f"dropout(training={q2!r})", lambda: F.dropout(xf, 0.5, training=q2)),
        (f"embedding(full {q2!r})", lambda: F.embedding(T.full((2,), q2, device=dev), emb)),
        (f"embedding(weight={q2!r})", lambda: F.embedding(xl, q2)),
        (
            f"cross_entropy(ignore_index={q2!r})",
            lambda: F.cross_entropy(xf, T.from_data([0, 1], device=dev), ignore_index=q2),
        ),
        (
            f"cross_entropy(label_smoothing={q2!r})",
            lambda: F.cross_entropy(xf, T.from_data([0, 1], device=dev), label_smoothing=q2),
        ),
        (
            f"nll_loss(reduction={q2!r})",
            lambda: F.nll_loss(xf, T.from_data([0, 1], device=dev), reduction=q2),
        ),
        (f"huber_loss(delta={q2!r})", lambda: F.huber_loss(xf, xf, delta=q2)),
        (f"smooth_l1_loss(beta={q2!r})", lambda: F.smooth_l1_loss(xf, xf, beta=q2)),
        (f"softmax(dim={q2!r})", lambda: F.softmax(xf, q2)),
        (f"layer_norm({q2!r})", lambda: F.layer_norm(xf, q2)),
        (f"layer_norm(eps={q2!r})", lambda: F.layer_norm(xf, 3, eps=q2)),
        (f"gelu({q2!r})", lambda: F.gelu(xf, q2)),
    ]
    for name, f in nn:
        add(name, f)
    return out


def run(iterations: int, seed: int) -> dict[str, list[str]]:
    """Fuzz ``iterations`` rounds per backend; findings keyed by backend."""
    r = np.random.default_rng(seed)
    devices = {"numpy": em.Device.cpu()}
    try:
        devices["torch"] = em.Device.torch("cpu")
    except em.DeviceError:
        pass
    findings: dict[str, list[str]] = {k: [] for k in devices}
    for _ in range(iterations):
        for bname, dev in devices.items():
            for name, f, silent in _calls(dev, r):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        res = f()
                    except em.EmberError:
                        res = None
                    except Exception as e:  # collecting what escapes is the point
                        findings[bname].append(f"{name[:70]}: {type(e).__name__}: {str(e)[:90]}")
                        continue
                for w in caught:
                    if _ARITHMETIC.search(str(w.message)):
                        continue  # IEEE division/overflow of the values, not of the arguments
                    kind = w.category.__name__
                    findings[bname].append(f"{name[:70]}: warning {kind}: {w.message}")
                if silent is not None and res is not None:
                    msg = silent(res)
                    if msg:
                        findings[bname].append(f"{name[:70]}: silent: {msg[:90]}")
    em.seed(0)
    return findings


def _kind(finding: str) -> str:
    """A finding without its argument values: the call's name and the exception type."""
    name, rest = finding.split(": ", 1)
    op = re.split(r"[( ]", name.replace("full_like(", "full_like "), maxsplit=1)[0]
    if " " in name and not name.startswith("full_like"):
        op = " ".join(name.split(" ")[:2])
    return op + ": " + rest.split(":")[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--all", action="store_true", help="print every finding, not one per kind")
    args = ap.parse_args()
    findings = run(args.iterations, args.seed)
    total = 0
    for bname, items in findings.items():
        total += len(items)
        kinds = Counter(_kind(i) for i in items)
        print(f"== {bname}: {len(items)} findings, {len(kinds)} kinds")
        seen: set[str] = set()
        for i in items:
            if args.all or _kind(i) not in seen:
                seen.add(_kind(i))
                print(f"  [{kinds[_kind(i)]}x] {i}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
