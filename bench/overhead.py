"""Core overhead benchmark (issue 2). Usage: python bench/overhead.py [--repeats N] [--json]"""

import argparse
import json

from ember.bench.overhead import format_rows, run

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = run(args.repeats)
    print(json.dumps(rows, indent=1) if args.json else format_rows(rows))
