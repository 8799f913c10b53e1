"""`fixpoint cmsis-nn status|install`: which CMSIS-NN checkout Fixpoint uses, and getting one."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from quantcore.commands._args import Subcommands

if TYPE_CHECKING:
    from quantcore.targets import cmsis_nn


def register(sub: Subcommands) -> None:
    parser = sub.add_parser("cmsis-nn", help="show or install the CMSIS-NN checkout Fixpoint builds against")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    status = actions.add_parser(
        "status", help="print which CMSIS-NN checkout is used, from where, its version"
    )
    status.add_argument("--path", metavar="DIR", help="use this checkout, as the CMSIS-NN path setting does")
    status.set_defaults(func=run_status)

    install = actions.add_parser("install", help="clone CMSIS-NN into Fixpoint's per-user cache")
    install.add_argument(
        "source", metavar="SOURCE", help="git URL, local CMSIS-NN checkout or bare repository"
    )
    install.add_argument(
        "--ref", metavar="REF", help="tag or commit to check out (default: the clone's HEAD)"
    )
    install.add_argument("--force", action="store_true", help="replace a different checkout already cached")
    install.set_defaults(func=run_install)


def describe(nn: cmsis_nn.CmsisNn) -> list[str]:
    from quantcore.targets import cmsis_nn  # here, not at the top: building the CLI's parser must stay light

    origins = {
        "setting": "the path setting (--path)",
        "env": f"the {cmsis_nn.ENV_VAR} environment variable",
        "cache": "Fixpoint's cache ($XDG_CACHE_HOME/fixpoint/cmsis-nn)",
    }
    version = nn.version or "unknown (no readable ARM.CMSIS-NN.pdsc)"
    if nn.version == "0.0.0":
        version += " (ARM.CMSIS-NN.pdsc's placeholder in git checkouts, release packs carry the number)"
    git = f"{nn.describe} (commit {nn.commit})" if nn.commit else "not a git checkout"
    warning = cmsis_nn.version_warning(nn)
    return [
        f"CMSIS-NN checkout: {nn.path}",
        f"  found via: {origins[nn.source]}",
        f"  version:   {version}",
        f"  git:       {git}",
        f"  Fixpoint's reference targets CMSIS-NN {cmsis_nn.TARGET_VERSION}",
        *([f"  warning:   {warning}"] if warning else []),
    ]


def run_status(args: argparse.Namespace) -> int:
    from quantcore.targets import cmsis_nn

    print("\n".join(describe(cmsis_nn.locate(args.path))))
    return 0


def run_install(args: argparse.Namespace) -> int:
    from quantcore.targets import cmsis_nn

    at = f" at {cmsis_nn.check_ref(args.ref)}" if args.ref else ""  # checked before it is shown
    print(f"cloning {args.source}{at} into {cmsis_nn.cache_checkout()} ...", flush=True)
    nn = cmsis_nn.install(args.source, args.ref, args.force)
    print("\n".join(describe(nn)))
    return 0
