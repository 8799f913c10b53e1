"""`fixpoint conformance --vectors DIR`: the reference kernels against CMSIS-NN's own test vectors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantcore.commands._args import Subcommands
from quantcore.kernels.rounding import Rounding


def register(sub: Subcommands) -> None:
    conf = sub.add_parser("conformance", help="check the int8 reference against CMSIS-NN test vectors")
    conf.add_argument("--vectors", required=True, metavar="DIR", help="folder of <kernel>/<case>.npz + .json")
    conf.add_argument(
        "--rounding",
        choices=[r.value for r in Rounding],
        default=Rounding.DOUBLE.value,
        help="requantization rounding of the CMSIS-NN build (single = CMSIS_NN_USE_SINGLE_ROUNDING)",
    )
    conf.add_argument(
        "--kernel", action="append", metavar="NAME", help="only this kernel family (repeatable)"
    )
    conf.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from quantcore.conformance.runner import Status, run_all, summary

    root = Path(args.vectors)
    if not root.is_dir():
        print(f"fixpoint conformance: {root} is not a directory of test vectors", file=sys.stderr)
        return 2
    rounding = Rounding(args.rounding)
    results = run_all(root, rounding, args.kernel or None, on_result=lambda r: print(r.line(), flush=True))
    if not results:
        print(
            f"fixpoint conformance: no cases (<kernel>/<case>.json + .npz) found under {root}",
            file=sys.stderr,
        )
        return 2
    print(summary(results))
    return 1 if any(r.status is Status.FAIL for r in results) else 0
