"""The `fixpoint` command line; each subcommand lives in quantcore.commands.<name>.

Packages that build on quantcore add subcommands through the entry-point group "fixpoint.commands"
(the language server adds `check` and `lsp`), so quantcore never imports them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from quantcore.commands import COMMANDS
from quantcore.errors import QuantcoreError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fixpoint", description="Float networks to verified int8 CMSIS-NN firmware."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"quantcore.commands.{name}").register(sub)
    for entry in sorted(entry_points(group="fixpoint.commands"), key=lambda e: e.name):
        entry.load().register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except QuantcoreError as exc:
        print(f"fixpoint {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
