"""`fixpoint build --target T [--src DIR]`: generated sources + test harness + CMSIS-NN -> firmware.

Prints the firmware's path and its memory figures (checked against the budget for Cortex-M targets).
"""

from __future__ import annotations

import argparse
import json

from quantcore.commands import _firmware as fw
from quantcore.commands._args import Subcommands


def register(sub: Subcommands) -> None:
    p = sub.add_parser("build", help="build the model's test firmware for a target")
    fw.add_arguments(p)
    p.add_argument("--channel", choices=["stdio", "semihosting", "uart"], help="how the harness reports")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return fw.guarded("build", args, lambda: _build(args))


def _build(args: argparse.Namespace) -> int:
    from quantcore.targets.build import Channel

    ctx = fw.resolve(args)
    model = fw.load_model(ctx, required=False)
    src = fw.sources(ctx, model)
    cases = fw.cases(ctx, model, src)
    firmware, cases = fw.build(ctx, src, cases, Channel(args.channel) if args.channel else None)
    report = fw.audit(ctx, firmware)
    if args.json:
        print(json.dumps({
            "target": ctx.target.name, "firmware": str(firmware.path), "channel": firmware.channel.value,
            "cases": firmware.cases, "flash_bytes": report.flash, "ram_bytes": report.ram,
            "arena_bytes": report.arena, "scratch_bytes": report.scratch,
        }))  # fmt: skip
    else:
        print(f"built {firmware.path} for {ctx.target.name} ({firmware.cases} cases, {cases.source})")
        print(f"memory: {report.format()}")
    return fw.EXIT_PASS
