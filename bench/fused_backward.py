"""A fused row's generic backward rule vs the fused kernel a backend supplies for it.

    python bench/fused_backward.py [--backend numpy|torch] [--threads N] [--repeats R]

For each row with ``fused_backward`` (softmax, log-softmax, layer/batch norm, attention) and each
shape below, the median milliseconds of the row's own rule (``OpSpec.rule``, gradients summed to
the inputs' shapes as the engine does) and of the backend's kernel where its class supplies one,
timed in alternating blocks (``_timing.alternating_ms``). A backend keeps a kernel only where it
is clearly faster than the rule (docs/ARCHITECTURE.md, "Adding an op").
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from _timing import alternating_ms, pin_threads

Case = tuple[str, tuple[tuple[int, ...], ...], dict[str, Any]]

CASES: list[Case] = [
    ("softmax", ((1024, 512),), {"dim": 1}),
    ("softmax", ((64, 1000),), {"dim": 1}),
    ("log_softmax", ((1024, 512),), {"dim": 1}),
    ("layer_norm", ((1024, 256), (256,), (256,)), {"normalized_ndim": 1, "eps": 1e-5}),
    ("layer_norm", ((8, 128, 512), (512,), (512,)), {"normalized_ndim": 1, "eps": 1e-5}),
    ("batch_norm", ((32, 64, 16, 16), (64,), (64,)), {"eps": 1e-5}),
    ("attention", ((8, 4, 128, 64),) * 3 + ((), ()), {"scale": 0.125, "is_causal": True}),
    # the GPT of bench/numpy_models.py: batch 16, 4 heads, context 64, head size 32
    ("attention", ((16, 4, 64, 32),) * 3 + ((), ()), {"scale": 0.177, "is_causal": True}),
    (
        "attention",
        ((2, 4, 64, 32),) * 3 + ((64, 64), (2, 4, 64, 64)),
        {"scale": 0.2, "is_causal": False},
    ),
]


def _rows(backend: str, repeats: int) -> list[dict[str, Any]]:
    import numpy as np

    import ember as em

    b = em.Device.cpu().b if backend == "numpy" else em.Device.torch("cpu").b
    rng = np.random.default_rng(0)
    return [_time_case(b, case, rng, repeats) for case in CASES]


def _time_case(b: Any, case: Case, rng: Any, repeats: int) -> dict[str, Any]:
    import numpy as np

    from ember.ops.registry import OPS

    name, shapes, attrs = case
    spec = OPS[name]
    inputs = tuple(b.from_numpy(rng.normal(size=s).astype(np.float32)) for s in shapes)
    out = b.table[name](*inputs, **attrs)
    grad = b.from_numpy(rng.normal(size=tuple(out.shape)).astype(np.float32))
    ctx = _Ctx(b, inputs, out, attrs)
    saved = inputs if spec.saves_inputs else (out,)
    kernel = type(b).fused_backwards.get(spec.fused_backward or "")

    def rule() -> object:
        grads = spec.rule(ctx, grad)  # type: ignore[misc]
        return [b.sum_to_shape(g, x.shape) for g, x in zip(grads, inputs) if g is not None]

    def fused() -> object:
        assert kernel is not None
        return kernel(grad, *saved, **attrs)

    t_kernel = None
    if kernel is not None and fused() is not NotImplemented:  # else the rule is what runs
        t_rule, tk = alternating_ms(rule, fused, repeats)
        t_kernel = round(statistics.median(tk), 3)
    else:
        t_rule, _ = alternating_ms(rule, rule, repeats, rounds=2)
    return {
        "row": name,
        "shape": "x".join(map(str, shapes[0])),
        "rule_ms": round(statistics.median(t_rule), 3),
        "kernel_ms": t_kernel,
    }


class _Ctx:
    """The node fields a rule reads; every input gets a gradient."""

    def __init__(self, b: Any, inputs: tuple[Any, ...], out: Any, attrs: dict[str, Any]) -> None:
        self.b, self.inputs, self.output, self.attrs = b, inputs, out, attrs
        self.parents = tuple(True for _ in inputs)
        self.shapes = tuple(tuple(x.shape) for x in inputs)
        self.saved = None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["numpy", "torch"], default="numpy")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    pin_threads(args.threads)
    print(f"{'row':12s} {'shape':16s} {'rule ms':>9s} {'kernel ms':>10s} {'kernel/rule':>12s}")
    for r in _rows(args.backend, args.repeats):
        k = r["kernel_ms"]
        ratio = "" if k is None else f"{k / r['rule_ms']:.2f}"
        kt = "-" if k is None else f"{k:.3f}"
        print(f"{r['row']:12s} {r['shape']:16s} {r['rule_ms']:9.3f} {kt:>10s} {ratio:>12s}")


if __name__ == "__main__":
    main()
