"""ember's NumPy kernel pool against its alternatives, arms alternated per round (issue 20).

For each workload of ``numpy_models.py`` at two threads, per round: ember with its pool as it is
(``pool``), with the pool's split threshold raised (``min1M``: 1 Mi elements), with splits turned
off at one family of call sites (``no-conv``, ``no-elem``, ``no-matmul``, ``no-attn``,
``no-ortconv``), with no pool splits at all while BLAS and ONNX Runtime keep two threads
(``noshare``), all on one thread (``serial``); then PyTorch at two and one threads. The arms'
order turns each round: the first ember block after PyTorch's ran slower on the dev VMs, so a
fixed order gave the first arm a handicap (session 19). A study of
where the pool's second thread pays on a host (bench/RESULTS.md, session 17), not a benchmark of
ember as it is. The modes patch module attributes between rounds.

  taskset -c 0,1 python bench/thread_modes.py --modes pool,noshare,serial --rounds 5
"""

import argparse
import os
import statistics
import sys
import time

os.environ["EMBER_NUM_THREADS"] = "2"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
ap = argparse.ArgumentParser()
ap.add_argument("--only", default="cnn,resnet,dcgan,lenet,gpt")
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--modes", default="pool,noshare,serial")
args = ap.parse_args()
import torch  # noqa: E402

torch.set_num_threads(2)
import numpy_models as nm  # noqa: E402

from ember.backend.numpy.kernels import (  # noqa: E402
    blas,
    conv,
    conv_chunks,
    matmul,
    ort_conv,
    ort_gelu,
    ort_gemm,
    threads,
)

orig_nt = threads.num_threads
orig_ct = threads._call_threads
MODS_NT = (threads, conv, conv_chunks, matmul, ort_conv)
MODS_CT = (threads, ort_conv, ort_gemm, ort_gelu)

from ember.backend.numpy.kernels import activations, attention, im2col, norm, pooling, softmax  # noqa: E402

ORIG = {}
SITES = {
    "conv": (conv,),
    "elem": (activations, im2col, pooling, norm, softmax),
    "matmul": (matmul,),
    "attn": (attention,),
    "ortconv": (ort_conv,),
}
for group in SITES.values():
    for m in group:
        ORIG[m] = {
            k: getattr(m, k)
            for k in ("_parallel_split", "_parallel_rows", "by_images")
            if hasattr(m, k)
        }


def _serial_split(n, elems, fn, blas=True):
    fn(0, n)


def _serial_rows(rows, cols, fn):
    block = max(1, threads._BLOCK_ELEMS // max(cols, 1))
    for lo in range(0, rows, block):
        fn(lo, min(lo + block, rows))


def _serial_images(n, work, fn):
    threads._share(fn, 0, n)


SERIAL = {
    "_parallel_split": _serial_split,
    "_parallel_rows": _serial_rows,
    "by_images": _serial_images,
}


def set_sites(off):
    for name, group in SITES.items():
        for m in group:
            for k, f in ORIG[m].items():
                setattr(m, k, SERIAL[k] if name in off else f)


def set_min(v):
    for m in (threads, conv, conv_chunks):
        m._PARALLEL_MIN = v


def set_mode(mode):
    set_min(int(float(mode[3:-1]) * (1 << 20)) if mode.startswith("min") else 1 << 16)
    set_sites(mode[3:].split("+") if mode.startswith("no-") else [])
    if mode == "pool" or mode.startswith("no-") or mode.startswith("min"):
        nt, ct, b = orig_nt, orig_ct, 2
    elif mode == "noshare":
        nt, ct, b = (lambda: 1), (lambda: 1 if threads._in_share() else 2), 2
    else:
        nt, ct, b = (lambda: 1), (lambda: 1), 1
    for m in MODS_NT:
        m.num_threads = nt
    for m in MODS_CT:
        m._call_threads = ct
    for _, put in blas._libraries():
        put(b)


modes = args.modes.split(",")
for name in args.only.split(","):
    e, t = nm.ember_step(name), nm.torch_step(name)
    times = {m: [] for m in modes + ["torch", "torch1"]}
    for r in range(args.rounds):
        for m in modes[r % len(modes) :] + modes[: r % len(modes)]:  # each arm first in turn
            set_mode(m)
            nm._block(e, args.repeats, times[m])
            time.sleep(0.1)
        set_mode("pool")
        torch.set_num_threads(2)
        nm._block(t, args.repeats, times["torch"])
        time.sleep(0.1)
        torch.set_num_threads(1)
        nm._block(t, args.repeats, times["torch1"])
        time.sleep(0.1)
        torch.set_num_threads(2)
    med = {m: statistics.median(v) for m, v in times.items()}
    print(
        f"{name:7s} "
        + "  ".join(f"{m} {v:7.2f}" for m, v in med.items())
        + "  | ratio/torch2: "
        + " ".join(f"{m} {med[m] / med['torch']:.2f}" for m in modes),
        flush=True,
    )
