"""Training-mode batch norm on the NumPy backend's kernels vs PyTorch's aten ops, in one process.

Per shape of ``numpy_models.py``'s ResNet and DCGAN steps (float32, batch 32): ember's
``batch_norm`` forward, ``batch_stats`` (the running statistics, served from the forward's sums)
and ``batch_norm_backward``, against ``aten::native_batch_norm`` and
``aten::native_batch_norm_backward``. Printed: per shape the medians over ``--rounds``
alternating blocks of ``--repeats`` calls (``_timing.alternating_ms``), and the totals weighted
by each shape's uses in one training step.

Threads: ``--threads N`` sets ``EMBER_NUM_THREADS`` (before ember loads) and
``torch.set_num_threads``; pin the process for a quiet run:
``taskset -c 2,3 python bench/batch_norm.py --threads 2``.

Usage: python bench/batch_norm.py [--threads 1] [--repeats 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

from _timing import alternating_ms, pin_threads

SHAPES: dict[str, list[tuple[int, int, int, int]]] = {
    "resnet": [(32, 16, 32, 32)] * 7 + [(32, 32, 16, 16)] * 5 + [(32, 64, 8, 8)] * 5,
    "dcgan": [(32, 128, 4, 4)] * 2 + [(32, 64, 8, 8)] * 2 + [(32, 32, 16, 16)],
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=10, help="calls per block")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    pin_threads(args.threads)
    import numpy as np
    import torch

    from ember.backend.numpy.kernels import malloc, norm

    malloc.tune()  # as the NumPy backend does at import
    torch.set_num_threads(args.threads)
    aten = torch.ops.aten
    rng = np.random.default_rng(0)
    for name, shapes in SHAPES.items():
        total_e = total_t = 0.0
        for shape in sorted(set(shapes), reverse=True):
            x, g = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
            w, b = np.ones(shape[1], np.float32), np.zeros(shape[1], np.float32)
            xt, gt, wt, bt = (torch.from_numpy(a) for a in (x, g, w, b))
            mean, var = torch.zeros(shape[1]), torch.ones(shape[1])

            def ember_bn(x=x, g=g, w=w, b=b) -> None:  # type: ignore[no-untyped-def]
                norm.batch_norm(x, w, b, 1e-5)
                norm.batch_stats(x, 1)
                norm.batch_norm_backward(g, x, w, b, 1e-5)

            def torch_bn(xt=xt, gt=gt, wt=wt, bt=bt, mean=mean, var=var) -> None:  # type: ignore[no-untyped-def]
                _, sm, si = aten.native_batch_norm(xt, wt, bt, mean, var, True, 0.1, 1e-5)
                aten.native_batch_norm_backward(
                    gt, xt, wt, mean, var, sm, si, True, 1e-5, [True, True, True]
                )

            te, tt = (
                statistics.median(t) / 1e3
                for t in alternating_ms(ember_bn, torch_bn, args.repeats, args.rounds)
            )
            uses = shapes.count(shape)
            total_e, total_t = total_e + uses * te, total_t + uses * tt
            print(
                f"{name:6s} {shape!s:18s} x{uses}  ember {te * 1e3:7.3f} ms  "
                f"torch {tt * 1e3:7.3f} ms  ratio {te / tt:5.2f}"
            )
        print(
            f"{name:6s} per step          ember {total_e * 1e3:7.2f} ms  "
            f"torch {total_t * 1e3:7.2f} ms  ratio {total_e / total_t:5.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
