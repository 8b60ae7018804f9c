"""Entry point of the ``ember`` command: parses arguments and runs one sub-command.

Usage errors (unknown options, bad values, incompatible choices) print the usage and exit with
status 2; failures while running (a missing file, an offline download) print one ``error:`` line
and exit with status 1; no traceback reaches the user unless ``EMBER_DEBUG=1`` is set.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from ..errors import EmberError
from . import bench as bench
from . import evaluate as evaluate
from . import generate as generate
from . import info as info
from . import quantize as quantize
from . import train as train

Runner = Callable[[argparse.Namespace, argparse.ArgumentParser], int]


def build_parser() -> argparse.ArgumentParser:
    """The full ``ember`` parser; each sub-parser stores its runner in ``args.run``."""
    parser = argparse.ArgumentParser(
        prog="ember",
        description="ember: a deep-learning framework with runtime autodiff.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (train, evaluate, generate, quantize, info, bench):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ember`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Runner = args.run
    sub_parser: argparse.ArgumentParser = args.parser
    try:
        return run(args, sub_parser)
    except KeyboardInterrupt:
        print("\nember: interrupted", file=sys.stderr)
        return 130
    except (EmberError, OSError, ValueError, TypeError, RuntimeError, KeyError) as e:
        if os.environ.get("EMBER_DEBUG"):
            raise
        print(f"ember {args.command}: error: {e}", file=sys.stderr)
        return 1
