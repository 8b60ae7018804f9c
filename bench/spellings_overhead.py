"""Cost of the PyTorch spellings on the hot Burn calls: ``sum()`` and ``reshape(tuple)`` through
``SpellingsMethods`` against the family functions they wrap, in one process (medians of rounds).

    python bench/spellings_overhead.py [--rounds 7] [--number 20000]
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import ember as em
from ember._core import layout
from ember._core.reduce import ReduceMethods


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--number", type=int, default=20000)
    args = p.parse_args()
    x = em.Tensor.ones((4, 4))
    pairs = {
        "sum()": (lambda: x.sum(), lambda: ReduceMethods.sum(x)),
        "reshape((16,))": (lambda: x.reshape((16,)), lambda: layout.reshape(x, (16,))),
        "transpose()": (lambda: x.transpose(), lambda: layout.transpose(x)),
    }
    print(f"{'call':16s} {'spelling us':>12s} {'family us':>10s} {'ratio':>6s}")
    for name, (ours, ref) in pairs.items():
        a = statistics.median(timeit.repeat(ours, number=args.number, repeat=args.rounds))
        b = statistics.median(timeit.repeat(ref, number=args.number, repeat=args.rounds))
        scale = 1e6 / args.number
        print(f"{name:16s} {a * scale:12.3f} {b * scale:10.3f} {a / b:6.3f}")


if __name__ == "__main__":
    main()
