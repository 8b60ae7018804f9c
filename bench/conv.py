"""LeNet-5 forward + backward, ember (NumPy backend) vs PyTorch CPU eager, 2 threads each.

ember's threads are its kernel pool (EMBER_NUM_THREADS: im2col, col2im, pooling and the conv
products are split between them); NumPy's BLAS runs one thread per call inside that split work
(ember/backend/numpy/kernels/blas.py), so the two never nest.

Network: conv 1->6 5x5, relu, max-pool 2, conv 6->16 5x5, relu, max-pool 2, fc 400->120, relu,
fc 120->84, relu, fc 84->10, cross-entropy; input (64, 1, 32, 32). One step = forward, loss and
backward to every parameter (no optimizer). Blocks of steps alternate (ember, torch; 5 rounds) in
one process; prints medians and minima for both and the ratio ember / PyTorch.

Usage: python bench/conv.py [--batch 64] [--repeats 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from _timing import alternating_ms, pin_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=10, help="steps per block")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    pin_threads(args.threads)  # before NumPy loads
    import numpy as np
    import torch
    import torch.nn.functional as TF

    import ember as em
    from ember.nn import functional as F

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    shapes = {
        "c1w": (6, 1, 5, 5), "c1b": (6,), "c2w": (16, 6, 5, 5), "c2b": (16,),
        "f1w": (120, 400), "f1b": (120,), "f2w": (84, 120), "f2b": (84,),
        "f3w": (10, 84), "f3b": (10,),
    }  # fmt: skip
    init = {k: (rng.normal(size=s) * 0.1).astype(np.float32) for k, s in shapes.items()}
    x_np = rng.normal(size=(args.batch, 1, 32, 32)).astype(np.float32)
    y_np = rng.integers(0, 10, size=(args.batch,))

    dev = em.Device.cpu().autodiff()
    ep = {k: em.tensor(v, device=dev).require_grad() for k, v in init.items()}
    ex, ey = em.tensor(x_np), em.tensor(y_np)

    def ember_step() -> object:
        h = F.max_pool2d(F.relu(F.conv2d(ex, ep["c1w"], ep["c1b"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, ep["c2w"], ep["c2b"])), 2)
        h = h.reshape((h.shape[0], -1))
        h = F.relu(F.linear(h, ep["f1w"], ep["f1b"]))
        h = F.relu(F.linear(h, ep["f2w"], ep["f2b"]))
        return F.cross_entropy(F.linear(h, ep["f3w"], ep["f3b"]), ey).backward()

    tp = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    tx, ty = torch.tensor(x_np), torch.tensor(y_np)

    def torch_step() -> object:
        for p in tp.values():
            p.grad = None
        h = TF.max_pool2d(TF.relu(TF.conv2d(tx, tp["c1w"], tp["c1b"])), 2)
        h = TF.max_pool2d(TF.relu(TF.conv2d(h, tp["c2w"], tp["c2b"])), 2)
        h = h.reshape(h.shape[0], -1)
        h = TF.relu(TF.linear(h, tp["f1w"], tp["f1b"]))
        h = TF.relu(TF.linear(h, tp["f2w"], tp["f2b"]))
        TF.cross_entropy(TF.linear(h, tp["f3w"], tp["f3b"]), ty).backward()
        return None

    # same gradients before timing anything
    grads = ember_step()
    torch_step()
    for k in ("c1w", "c2w", "f1w"):
        g = ep[k].grad(grads)  # type: ignore[arg-type]
        assert g is not None
        np.testing.assert_allclose(g.to_numpy(), tp[k].grad.numpy(), rtol=1e-3, atol=1e-5)

    ta, tb = alternating_ms(ember_step, torch_step, args.repeats)
    ember_ms, torch_ms = statistics.median(ta), statistics.median(tb)
    print(
        f"LeNet-5 fwd+bwd, batch {args.batch}, {args.threads} threads, float32, "
        f"5 x {args.repeats} runs each"
    )
    print(f"  ember (numpy): median {ember_ms:8.3f} ms   min {min(ta):8.3f} ms")
    print(f"  torch eager:   median {torch_ms:8.3f} ms   min {min(tb):8.3f} ms")
    print(
        f"  ratio ember/torch: median {ember_ms / torch_ms:.2f}x, min {min(ta) / min(tb):.2f}x"
        "  (target <= 2.0x)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
